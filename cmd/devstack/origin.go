package main

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/waitroom/waitroom/internal/account"
	"github.com/waitroom/waitroom/internal/pass"
	"github.com/waitroom/waitroom/internal/testsupport/mailsink"
)

// The demo's origin site: the site where fans log in, as far as waitroom
// cares. It holds an Ed25519 key (.data/origin-ed25519.pem; the gateway
// trusts its public half, .data/origin-public.pem, through
// auth.account_keys_file) and mints account tokens for a few demo
// accounts, so a newcomer can try one place per account and the points
// wallet (README.md, "Accounts in the demo"):
//
//	GET  /                   the demo accounts, each with a "log in" link
//	GET  /login/{account}    sets cookie wr_u (a 30-minute token) and goes to the waiting room
//	GET  /logout             clears wr_u
//	GET  /token/{account}    the token alone, for curl (header X-Waitroom-Account)
//	GET  /mail               each demo account's inbox: the emails the room sent it
//	                         (the mail sink make run starts, mailsink)
//
// Each token carries the account's email, <account>@demo.test, so a fan
// logged in here may leave the waiting page and be emailed when it is its
// turn (DESIGN.md, "Away from the page"); the email lands in the sink and
// shows at /mail.
// Cookies are not kept apart by port, so wr_u set here on localhost reaches
// the gateway on localhost:8080. On start it credits each demo account
// 20,000 points once (reference demo-welcome-<account>), through the
// gateway's operators' API.
var demoAccounts = []string{"alice", "bob", "chika", "minjun"}

const (
	originAddr = "127.0.0.1:8090"
	// originURL is where a reader opens the site: as localhost, the room's
	// host, so that its cookie reaches the room (127.0.0.1 is another host
	// to a browser, and its cookies stay there).
	originURL      = "http://localhost:8090"
	originTokenTTL = 30 * time.Minute
	welcomePoints  = 20000
)

// originKeys makes (once) the origin site's key and writes its public half
// where the config's auth.account_keys_file expects it.
func originKeys(data string) (ed25519.PrivateKey, string, error) {
	privFile := filepath.Join(data, "origin-ed25519.pem")
	if _, err := pass.EnsureKeyFile(privFile); err != nil {
		return nil, "", err
	}
	priv, err := pass.LoadPrivateKey(privFile)
	if err != nil {
		return nil, "", err
	}
	pub, err := account.EncodePublicKeys(priv.Public().(ed25519.PublicKey))
	if err != nil {
		return nil, "", err
	}
	pubFile := filepath.Join(data, "origin-public.pem")
	return priv, pubFile, os.WriteFile(pubFile, pub, 0o644)
}

// devAdminToken is the operators' token of the demo: WAITROOM_ADMIN_TOKEN
// if set, else a new random one (logged), so the origin site can credit
// points.
func devAdminToken() string {
	if t := os.Getenv("WAITROOM_ADMIN_TOKEN"); t != "" {
		return t
	}
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "dev-" + hex.EncodeToString(b[:])
}

var originPage = template.Must(template.New("origin").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Demo origin site</title>
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:40rem;margin:2rem auto;padding:0 1rem}li{margin:.4rem 0}</style></head>
<body><h1>Demo origin site</h1>
<p>Log in as a demo account: the site signs an account token (cookie <code>wr_u</code>) and sends you to the waiting room.
One place per account, from any browser; each account starts with {{.Points}} points to pay with.</p>
<ul>{{range .Accounts}}<li><a href="/login/{{.}}">Log in as {{.}}</a> · <a href="/token/{{.}}">token</a></li>{{end}}</ul>
<p>Each account's token carries its email (alice@demo.test, …): in the waiting room, <b>Leave and email me</b>
keeps your place without the page; the email arrives in the account's inbox at <a href="/mail">/mail</a>.</p>
<p><a href="/logout">Log out</a> · <a href="/mail">Inboxes</a> · waitroom: <a href="{{.Gateway}}">{{.Gateway}}</a></p>
</body></html>`))

// demoEmail is a demo account's address (the .test domain is reserved: it
// reaches nobody but the sink).
func demoEmail(account string) string { return account + "@demo.test" }

// mailPage shows each demo account's inbox, newest first: each email's
// subject, when it came, its plain text and its HTML (in a sandboxed frame:
// no script, no link out of it but by a new tab).
var mailPage = template.Must(template.New("mail").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta http-equiv="refresh" content="5"><title>Demo inboxes</title>
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:48rem;margin:2rem auto;padding:0 1rem}
section{border-top:1px solid #ccc;margin-top:1.5rem}article{border:1px solid #ddd;border-radius:.4rem;padding:.75rem;margin:.75rem 0}
pre{white-space:pre-wrap;background:#f6f6f6;padding:.5rem}iframe{width:100%;height:26rem;border:1px solid #ddd}</style></head>
<body><h1>Demo inboxes</h1>
<p>The emails waitroom sent each demo account, as the mail sink of <code>make run</code> received them (it keeps them in memory: a restart empties it). This page reloads every 5 seconds. <a href="/">Back to the accounts</a></p>
{{if not .Sink}}<p><b>No mail sink runs:</b> notify.smtp_url does not name a loopback address, so make run started none.</p>{{end}}
{{range .Inboxes}}<section id="inbox-{{.Account}}"><h2>{{.Account}} &lt;{{.Email}}&gt;</h2>
{{range .Mails}}<article><h3 class="subject">{{.Subject}}</h3><p><small>{{.At.Format "2006-01-02 15:04:05"}} · {{.MessageID}}</small></p>
<details open><summary>HTML</summary><iframe sandbox="allow-popups allow-popups-to-escape-sandbox" srcdoc="{{.HTML}}" title="{{.Subject}}"></iframe></details>
<details><summary>Plain text</summary><pre>{{.Text}}</pre></details></article>
{{else}}<p>No email yet.</p>{{end}}</section>{{end}}
</body></html>`))

// serveOrigin runs the demo origin site until ctx ends.
func serveOrigin(ctx context.Context, log *slog.Logger, priv ed25519.PrivateKey, gateway string, sink *mailsink.Sink) error {
	ln, err := net.Listen("tcp", originAddr)
	if err != nil {
		return fmt.Errorf("demo origin site: %w", err)
	}
	srv := &http.Server{Handler: originHandler(priv, gateway, sink), ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	log.Info("demo origin site", "url", originURL+"/", "accounts", strings.Join(demoAccounts, ", "))
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// originHandler is the demo origin site's routes (see the top of this
// file); sink is the demo's mail sink (nil: none runs).
func originHandler(priv ed25519.PrivateKey, gateway string, sink *mailsink.Sink) http.Handler {
	known := map[string]bool{}
	for _, a := range demoAccounts {
		known[a] = true
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_ = originPage.Execute(w, map[string]any{"Accounts": demoAccounts, "Gateway": gateway + "/", "Points": welcomePoints})
	})
	mint := func(w http.ResponseWriter, r *http.Request) (string, bool) {
		acct := r.PathValue("account")
		if !known[acct] {
			http.Error(w, "no such demo account", http.StatusNotFound)
			return "", false
		}
		tok, err := account.MintWithEmail(priv, acct, "", demoEmail(acct), time.Now(), originTokenTTL)
		if err != nil {
			http.Error(w, "cannot sign", http.StatusInternalServerError)
			return "", false
		}
		return tok, true
	}
	mux.HandleFunc("GET /token/{account}", func(w http.ResponseWriter, r *http.Request) {
		if tok, ok := mint(w, r); ok {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			fmt.Fprintln(w, tok)
		}
	})
	mux.HandleFunc("GET /login/{account}", func(w http.ResponseWriter, r *http.Request) {
		if tok, ok := mint(w, r); ok {
			http.SetCookie(w, &http.Cookie{Name: "wr_u", Value: tok, Path: "/", MaxAge: int(originTokenTTL.Seconds()),
				HttpOnly: true, SameSite: http.SameSiteLaxMode})
			http.Redirect(w, r, gateway+"/", http.StatusSeeOther)
		}
	})
	mux.HandleFunc("GET /mail", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		type inbox struct {
			Account, Email string
			Mails          []mailsink.Message
		}
		var boxes []inbox
		for _, a := range demoAccounts {
			b := inbox{Account: a, Email: demoEmail(a)}
			if sink != nil {
				b.Mails = sink.For(b.Email)
				slices.Reverse(b.Mails) // newest first
			}
			boxes = append(boxes, b)
		}
		_ = mailPage.Execute(w, map[string]any{"Inboxes": boxes, "Sink": sink != nil})
	})
	mux.HandleFunc("GET /logout", func(w http.ResponseWriter, r *http.Request) {
		http.SetCookie(w, &http.Cookie{Name: "wr_u", Value: "", Path: "/", MaxAge: -1})
		http.Redirect(w, r, "/", http.StatusSeeOther)
	})
	return mux
}

// welcomeCredits credits each demo account its welcome points once (the
// same reference on every start credits nothing more), as an origin site
// does through the operators' API, retrying until the services are up.
func welcomeCredits(ctx context.Context, log *slog.Logger, gateway, adminToken string) {
	client := &http.Client{Timeout: 5 * time.Second}
	for _, acct := range demoAccounts {
		body := fmt.Sprintf(`{"points":%d,"reference":"demo-welcome-%s"}`, welcomePoints, acct)
		for attempt := 0; ; attempt++ {
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, gateway+"/api/v1/admin/wallets/"+acct+"/credits", strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+adminToken)
			req.Header.Set("Content-Type", "application/json")
			resp, err := client.Do(req)
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusCreated {
					break
				}
			}
			if attempt >= 60 || ctx.Err() != nil {
				log.Warn("demo origin site: welcome points not credited", "account", acct, "err", err)
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(500 * time.Millisecond):
			}
		}
	}
	log.Info("demo origin site: welcome points credited", "points", welcomePoints, "accounts", strings.Join(demoAccounts, ", "))
}
