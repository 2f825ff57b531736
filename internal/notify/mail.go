package notify

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net/mail"
	"net/textproto"
	"strings"
	"time"
)

// compose writes an email as the mail system takes it (RFC 5322, MIME):
// multipart/alternative of plain text and HTML, both UTF-8 and
// quoted-printable, the subject encoded (RFC 2047) for any language.
// Nothing a template wrote can add a header: line breaks in the subject
// become spaces, and the address was checked at Enqueue.
func compose(from, to, lang, id string, now time.Time, m Mail) ([]byte, error) {
	if !ValidAddress(to) {
		return nil, fmt.Errorf("compose: bad address %q", to)
	}
	var b bytes.Buffer
	w := multipart.NewWriter(&b)
	subject := strings.Join(strings.Fields(m.Subject), " ")
	if a, err := mail.ParseAddress(from); err == nil {
		from = a.String() // a display name in any language, encoded
	}
	head := [][2]string{
		{"From", from},
		{"To", to},
		{"Subject", mime.QEncoding.Encode("UTF-8", subject)},
		{"Date", now.UTC().Format(time.RFC1123Z)},
		{"Message-ID", id},
		{"MIME-Version", "1.0"},
		{"Content-Language", lang},
		// An automatic message: no vacation replies to it (RFC 3834).
		{"Auto-Submitted", "auto-generated"},
		{"Content-Type", "multipart/alternative; boundary=\"" + w.Boundary() + "\""},
	}
	var h bytes.Buffer
	for _, kv := range head {
		h.WriteString(kv[0] + ": " + kv[1] + "\r\n")
	}
	h.WriteString("\r\n")
	for _, part := range []struct{ typ, body string }{{"text/plain", m.Text}, {"text/html", m.HTML}} {
		pw, err := w.CreatePart(textproto.MIMEHeader{
			"Content-Type":              {part.typ + "; charset=UTF-8"},
			"Content-Transfer-Encoding": {"quoted-printable"},
		})
		if err != nil {
			return nil, err
		}
		qp := quotedprintable.NewWriter(pw)
		if _, err := qp.Write([]byte(crlf(part.body))); err != nil {
			return nil, err
		}
		if err := qp.Close(); err != nil {
			return nil, err
		}
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return append(h.Bytes(), b.Bytes()...), nil
}

// crlf ends every line with CRLF, as SMTP carries them.
func crlf(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "\r\n", "\n"), "\n", "\r\n")
}

// messageID is the same for every copy of one message (its event and id),
// so that a mail store or client that dedupes by Message-ID shows a message
// sent twice once; the domain is the sender's.
func messageID(event, id, from string) string {
	sum := sha256.Sum256([]byte(event + "\x00" + id))
	domain := "waitroom.invalid"
	if a := envelope(from); strings.Contains(a, "@") {
		domain = a[strings.LastIndexByte(a, '@')+1:]
	}
	return "<" + hex.EncodeToString(sum[:16]) + "@" + domain + ">"
}

// envelope is the plain address of a From header ("name <a@b>" → a@b).
func envelope(from string) string {
	if a, err := mail.ParseAddress(from); err == nil {
		return a.Address
	}
	return from
}
