package notify_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom/internal/notify"
	"github.com/waitroom/waitroom/internal/rdb"
	"github.com/waitroom/waitroom/internal/testsupport/mailsink"
	"github.com/waitroom/waitroom/internal/testsupport/testenv"
)

const event = "premiere"

type env struct {
	t      *testing.T
	rc     *redis.Client
	outbox *notify.Outbox
	sink   *mailsink.Sink
}

// setup is a private Redis and a real SMTP server (STARTTLS, AUTH PLAIN
// required), both gone when the test ends.
func setup(t *testing.T) *env {
	t.Helper()
	return setupWith(t, mailsink.Options{TLS: true, User: "room", Password: "s3cret"})
}

// setupWith is setup with a sink of its own options.
func setupWith(t *testing.T, o mailsink.Options) *env {
	t.Helper()
	_, rc := testenv.Redis(t)
	sink, err := mailsink.Start(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sink.Close() })
	return &env{t: t, rc: rc, outbox: notify.NewOutbox(rdb.New(rc)), sink: sink}
}

// mailer is an SMTP client of the sink, trusting its certificate.
func (e *env) mailer() *notify.SMTP {
	e.t.Helper()
	m, err := notify.NewSMTP(e.sink.URL())
	if err != nil {
		e.t.Fatal(err)
	}
	m.TLS = &tls.Config{RootCAs: e.sink.CertPool()}
	m.Timeout = 5 * time.Second
	return m
}

func render(event string, m notify.Message) (notify.Mail, error) {
	return notify.Mail{
		Subject: "It's your turn · " + event + " · 順番です",
		Text:    "Come back: " + m.Data["link"] + "\n",
		HTML:    `<p>Come back: <a href="` + m.Data["link"] + `">here</a></p>`,
	}, nil
}

func (e *env) sender(o notify.SenderOptions) *notify.Sender {
	if o.Mailer == nil {
		o.Mailer = e.mailer()
	}
	o.Render, o.From, o.Events = render, "waitroom <noreply@example.com>", func() []string { return []string{event} }
	return notify.NewSender(e.outbox, o)
}

// enqueue queues m for the test's event.
func (e *env) enqueue(m notify.Message) {
	e.t.Helper()
	if _, err := e.outbox.Enqueue(context.Background(), event, m); err != nil {
		e.t.Fatal(err)
	}
}

func yourTurn(to, key string) notify.Message {
	return notify.Message{Kind: notify.KindYourTurn, Key: key, To: to, Lang: "ja",
		Data: map[string]string{"link": "http://localhost:8080/e/premiere?t=" + key}, NotAfter: time.Now().Add(time.Hour)}
}

// A message is queued once per (event, kind, key), however many callers
// race to queue it, and sent once: the mail arrives over STARTTLS and
// AUTH, multipart, its subject decoded, its Message-ID set.
func TestEnqueueOnceSendOnce(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	var queued atomic.Int64
	testenv.Race(32, func(int) {
		ok, err := e.outbox.Enqueue(ctx, event, yourTurn("alice@example.test", "t1"))
		if err != nil {
			t.Error(err)
		}
		if ok {
			queued.Add(1)
		}
	})
	if queued.Load() != 1 {
		t.Fatalf("queued %d times; want 1", queued.Load())
	}
	if sent := e.sender(notify.SenderOptions{}).Round(ctx); sent != 1 {
		t.Fatalf("round sent %d; want 1", sent)
	}
	msgs := e.sink.Messages()
	if len(msgs) != 1 {
		t.Fatalf("sink got %d emails; want 1", len(msgs))
	}
	m := msgs[0]
	if !m.TLS || m.From != "noreply@example.com" || len(m.To) != 1 || m.To[0] != "alice@example.test" {
		t.Errorf("envelope from %q to %v tls %v; want noreply@example.com, [alice@example.test], over TLS", m.From, m.To, m.TLS)
	}
	if m.Subject != "It's your turn · premiere · 順番です" || !strings.Contains(m.Text, "?t=t1") || !strings.Contains(m.HTML, `href="http://localhost:8080/e/premiere?t=t1"`) {
		t.Errorf("subject %q text %q html %q", m.Subject, m.Text, m.HTML)
	}
	if m.MessageID == "" || m.Header.Get("Content-Language") != "ja" || m.Header.Get("Auto-Submitted") != "auto-generated" {
		t.Errorf("headers %v", m.Header)
	}
	// Sent: queued again it is not, and nothing more goes out.
	if ok, _ := e.outbox.Enqueue(ctx, event, yourTurn("alice@example.test", "t1")); ok {
		t.Error("a sent message was queued again")
	}
	if sent := e.sender(notify.SenderOptions{}).Round(ctx); sent != 0 || len(e.sink.Messages()) != 1 {
		t.Errorf("a second round sent %d (sink has %d); want 0 (1)", sent, len(e.sink.Messages()))
	}
	if st, _ := e.outbox.State(ctx, event, "your_turn:t1"); st != "sent" {
		t.Errorf("state %q; want sent", st)
	}
}

// A server that refuses (451), then accepts: the message is retried with
// backoff and delivered once.
func TestRefusedThenAcceptedStillDelivers(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	e.sink.Refuse(2)
	e.enqueue(yourTurn("bob@example.test", "t2"))
	s := e.sender(notify.SenderOptions{MaxBackoff: 50 * time.Millisecond})
	deadline := time.Now().Add(10 * time.Second)
	for len(e.sink.For("bob@example.test")) == 0 && time.Now().Before(deadline) {
		s.Round(ctx)
		time.Sleep(60 * time.Millisecond)
	}
	// The refusals are counted at the server: a round may try the message
	// again once its backoff passed (on a loaded machine a send outlasts
	// 50 ms), so rounds are not tries.
	if got, left := len(e.sink.For("bob@example.test")), e.sink.Refusing(); got != 1 || left != 0 {
		t.Fatalf("%d emails, %d of the 2 refusals still to come; want 1 email, after both refusals", got, left)
	}
}

// One sender at a time: three senders race their rounds over 20 messages;
// each message arrives once.
func TestThreeSendersOneEach(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	for i := range 20 {
		e.enqueue(yourTurn("fan@example.test", "k"+string(rune('a'+i))))
	}
	senders := []*notify.Sender{e.sender(notify.SenderOptions{}), e.sender(notify.SenderOptions{}), e.sender(notify.SenderOptions{})}
	for range 3 {
		testenv.Race(3, func(i int) { senders[i].Round(ctx) })
	}
	got := map[string]int{}
	for _, m := range e.sink.Messages() {
		got[m.MessageID]++
	}
	if len(got) != 20 || len(e.sink.Messages()) != 20 {
		t.Fatalf("%d emails, %d distinct; want 20 and 20", len(e.sink.Messages()), len(got))
	}
}

// One email per message (DESIGN.md, Fair play, third round): three
// senders race over 30 messages to a slow server (each message takes
// 100 ms to be accepted, so a round's sends last ~3 s, far longer than
// the senders' lease, 300 ms, and than a message's claim, 1.5 s, which is
// longer than one send's own time-out, 1 s). Each message arrives once,
// counted by Message-ID at the server.
func TestOneEmailPerMessageWhileSendersRace(t *testing.T) {
	e := setupWith(t, mailsink.Options{TLS: true, User: "room", Password: "s3cret", Delay: 100 * time.Millisecond})
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	const n = 30
	for i := range n {
		e.enqueue(yourTurn("fan@example.test", fmt.Sprintf("k%02d", i)))
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		testenv.Race(3, func(int) {
			m := e.mailer()
			m.Timeout = time.Second
			s := e.sender(notify.SenderOptions{Mailer: m, Lease: 300 * time.Millisecond, Inflight: 1500 * time.Millisecond})
			for ctx.Err() == nil {
				s.Round(ctx)
				time.Sleep(10 * time.Millisecond)
			}
		})
	}()
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if p, _ := e.outbox.Pending(ctx, event); p == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("messages still pending after 60 s")
		}
	}
	stop()
	<-done
	got := map[string]int{}
	for _, m := range e.sink.Messages() {
		got[m.MessageID]++
	}
	for id, c := range got {
		if c != 1 {
			t.Errorf("Message-ID %s arrived %d times; want once", id, c)
		}
	}
	if len(got) != n {
		t.Errorf("%d distinct messages arrived (%d emails); want %d", len(got), len(e.sink.Messages()), n)
	}
}

// A sender frozen mid-send past its claim (a process paused) comes back to
// a message another sender claimed since and is sending: its failure
// changes nothing (the message is not put back under the other's feet),
// and the other's send is the one copy.
func TestALapsedClaimChangesNothing(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	e.enqueue(yourTurn("eun@example.test", "t6"))
	frozen := &stall{taken: make(chan struct{}), thaw: make(chan struct{})}
	a := e.sender(notify.SenderOptions{Mailer: frozen, Lease: 200 * time.Millisecond, Inflight: 400 * time.Millisecond, MaxBackoff: 10 * time.Millisecond})
	aDone := make(chan struct{})
	go func() { defer close(aDone); a.Round(ctx) }()
	<-frozen.taken
	// B takes the lease and the message once A's lapse, and is held at
	// the server mid-send.
	held, release := e.sink.Hold()
	defer release()
	b := e.sender(notify.SenderOptions{Lease: 200 * time.Millisecond, Inflight: 10 * time.Second})
	bSent := make(chan int)
	go func() {
		for {
			if n := b.Round(ctx); n > 0 {
				bSent <- n
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	select {
	case <-held:
	case <-time.After(10 * time.Second):
		t.Fatal("B never sent")
	}
	k := rdb.KeysOf(event)
	claimBy, _ := e.rc.HGet(ctx, k.MailClaims, "your_turn:t6").Result()
	due, _ := e.rc.ZScore(ctx, k.Outbox, "your_turn:t6").Result()
	if claimBy != b.Owner() {
		t.Fatalf("claimed by %q; want B, %q", claimBy, b.Owner())
	}
	close(frozen.thaw) // A wakes, its send failed
	<-aDone
	if by, _ := e.rc.HGet(ctx, k.MailClaims, "your_turn:t6").Result(); by != b.Owner() {
		t.Errorf("after A's failure the claim is %q's; want still B's", by)
	}
	if now, _ := e.rc.ZScore(ctx, k.Outbox, "your_turn:t6").Result(); now != due {
		t.Errorf("A's failure moved the message's due time from %v to %v", due, now)
	}
	release()
	<-bSent
	if got := e.sink.For("eun@example.test"); len(got) != 1 {
		t.Fatalf("%d emails; want 1", len(got))
	}
	if st, _ := e.outbox.State(ctx, event, "your_turn:t6"); st != "sent" {
		t.Errorf("state %q; want sent", st)
	}
}

// stall is a mailer whose process freezes mid-send until thawed, then
// finds its send failed.
type stall struct{ taken, thaw chan struct{} }

func (s *stall) Send(context.Context, string, string, []byte) error {
	close(s.taken)
	<-s.thaw
	return errors.New("connection reset")
}
func (s *stall) Close() error { return nil }

// A sender that dies mid-send (it took the message, the server may even
// have it, but it never marked it sent) leaves it to another sender once
// its lease and the message's visibility timeout pass: the mail goes out,
// with the same Message-ID.
func TestSenderKilledMidSend(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	e.enqueue(yourTurn("chika@example.test", "t3"))
	h := &hang{taken: make(chan struct{}), dead: make(chan struct{})}
	t.Cleanup(func() { close(h.dead) })
	dead := e.sender(notify.SenderOptions{Mailer: h, Lease: 300 * time.Millisecond, Inflight: 500 * time.Millisecond})
	go dead.Round(ctx) // takes it, and never comes back from sending it
	<-h.taken
	if n, _ := e.outbox.Pending(ctx, event); n != 1 {
		t.Fatalf("pending %d after the dead sender; want 1", n)
	}
	next := e.sender(notify.SenderOptions{Lease: 300 * time.Millisecond})
	if sent := next.Round(ctx); sent != 0 {
		t.Fatalf("another sender sent %d while the dead one's lease held; want 0", sent)
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(e.sink.Messages()) == 0 && time.Now().Before(deadline) {
		next.Round(ctx)
		time.Sleep(100 * time.Millisecond)
	}
	if got := e.sink.For("chika@example.test"); len(got) != 1 {
		t.Fatalf("%d emails after the sender died; want 1", len(got))
	}
}

// hang is a mailer whose process dies while it sends: Send never returns
// while the test runs, so its sender neither renews its lease nor marks
// the message.
type hang struct{ taken, dead chan struct{} }

func (h *hang) Send(ctx context.Context, _, _ string, _ []byte) error {
	close(h.taken)
	<-h.dead
	return context.Canceled
}
func (h *hang) Close() error { return nil }

// A message still unsent at its deadline is dropped, counted expired.
func TestExpiredUnsentIsDropped(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	m := yourTurn("minjun@example.test", "t4")
	m.NotAfter = time.Now().Add(-time.Second)
	e.enqueue(m)
	e.sender(notify.SenderOptions{}).Round(ctx)
	if st, _ := e.outbox.State(ctx, event, m.ID()); st != "expired" || len(e.sink.Messages()) != 0 {
		t.Fatalf("state %q, %d emails; want expired, none", st, len(e.sink.Messages()))
	}
}

// Bad input is refused before Redis: no kind, no key, a key with a space,
// and every address that is not one plain address (a display name, a
// second address, a header smuggled in).
func TestEnqueueRefusesBadInput(t *testing.T) {
	e := setup(t)
	for _, m := range []notify.Message{
		{Kind: "", Key: "k", To: "a@b.test"},
		{Kind: "your_turn", Key: "", To: "a@b.test"},
		{Kind: "your_turn", Key: "a b", To: "a@b.test"},
		{Kind: "your_turn", Key: "k", To: ""},
		{Kind: "your_turn", Key: "k", To: "Alice <a@b.test>"},
		{Kind: "your_turn", Key: "k", To: "a@b.test, c@d.test"},
		{Kind: "your_turn", Key: "k", To: "a@b.test\r\nBcc: c@d.test"},
		{Kind: "your_turn", Key: "k", To: "no-at-sign"},
		{Kind: "your_turn", Key: "k", To: "a@"},
	} {
		if ok, err := e.outbox.Enqueue(context.Background(), event, m); ok || err == nil {
			t.Errorf("Enqueue(%+v) = %v, %v; want refused", m, ok, err)
		}
	}
	if n, _ := e.outbox.Pending(context.Background(), event); n != 0 {
		t.Errorf("pending %d; want 0", n)
	}
}

// A wrong password is refused by the server, and nothing is sent. (Where
// a password may go at all is TestMailGoesOverTLS's.)
func TestWrongPasswordFails(t *testing.T) {
	e := setup(t)
	m, err := notify.NewSMTP(strings.Replace(e.sink.URL(), "s3cret", "wrong", 1))
	if err != nil {
		t.Fatal(err)
	}
	m.TLS = &tls.Config{RootCAs: e.sink.CertPool()}
	if err := m.Send(context.Background(), "noreply@example.com", "a@b.test", []byte("Subject: x\r\n\r\nx\r\n")); err == nil {
		t.Fatal("a wrong password sent an email")
	}
	if len(e.sink.Messages()) != 0 {
		t.Fatal("the sink accepted an email without AUTH")
	}
}

// At least once, honestly: a sender that dies after the server accepted a
// message but before it marked it sent leaves it to be sent again, and the
// fan gets two copies, with one Message-ID (a mail store that dedupes by
// it shows one).
func TestDiedAfterTheServerHadItSendsTwiceWithOneMessageID(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	e.enqueue(yourTurn("dana@example.test", "t5"))
	d := &deliverThenDie{SMTP: e.mailer(), delivered: make(chan struct{}), dead: make(chan struct{})}
	t.Cleanup(func() { close(d.dead) })
	go e.sender(notify.SenderOptions{Mailer: d, Lease: 300 * time.Millisecond, Inflight: 500 * time.Millisecond}).Round(ctx)
	<-d.delivered
	next := e.sender(notify.SenderOptions{Lease: 300 * time.Millisecond})
	deadline := time.Now().Add(5 * time.Second)
	for len(e.sink.Messages()) < 2 && time.Now().Before(deadline) {
		next.Round(ctx)
		time.Sleep(100 * time.Millisecond)
	}
	got := e.sink.For("dana@example.test")
	if len(got) != 2 || got[0].MessageID != got[1].MessageID || got[0].MessageID == "" {
		t.Fatalf("%d copies, Message-IDs %q; want 2 copies of one Message-ID", len(got), ids(got))
	}
	if st, _ := e.outbox.State(ctx, event, "your_turn:t5"); st != "sent" {
		t.Errorf("state %q; want sent", st)
	}
}

func ids(ms []mailsink.Message) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.MessageID)
	}
	return out
}

// deliverThenDie delivers, then its process dies before it can say so.
type deliverThenDie struct {
	*notify.SMTP
	delivered, dead chan struct{}
}

func (d *deliverThenDie) Send(ctx context.Context, from, to string, msg []byte) error {
	if err := d.SMTP.Send(ctx, from, to, msg); err != nil {
		return err
	}
	close(d.delivered)
	<-d.dead
	return context.Canceled
}
