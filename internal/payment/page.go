package payment

import (
	"bytes"
	"embed"
	"errors"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

//go:embed page/page.html page/sim.css
var pageFiles embed.FS

var (
	pageTmpl = template.Must(template.ParseFS(pageFiles, "page/page.html"))
	pageCSS  = mustRead("page/sim.css")
)

func mustRead(name string) []byte {
	b, err := pageFiles.ReadFile(name)
	if err != nil {
		panic(err)
	}
	return b
}

// Handler is the simulator's hosted payment page, on its own origin
// (PageURL: the booking core's listener), as a real provider's would be:
//
//	GET  /pay/{paymentId}   the amount, what is bought, Pay and Cancel, and
//	                        (for tests and the demo) what the provider does
//	                        once the fan pays: succeed, fail, late, twice, never
//	POST /pay/{paymentId}   the fan's decision (action=pay|cancel, outcome);
//	                        303 to the session's return URL
//	GET  /pay/sim.css       its style
//
// The payment id (random, 96 bits) is the only key, as with a hosted
// checkout link. The page needs no script, and its Content-Security-Policy
// allows its own style and forms that post to itself and return the fan to
// the session's return origin.
func (s *Simulator) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /pay/sim.css", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/css; charset=utf-8")
		w.Header().Set("Cache-Control", "public, max-age=3600")
		_, _ = w.Write(pageCSS)
	})
	mux.HandleFunc("GET /pay/{paymentId}", s.page)
	mux.HandleFunc("POST /pay/{paymentId}", s.decide)
	return mux
}

// pageView is what the template shows.
type pageView struct {
	ID, Title, Description, Amount, ReturnURL string
	State                                     string // open | processing | paid | declined | cancelled | expired | missing | unavailable
	Words                                     string
	Late                                      bool
	Choices                                   []choiceView
}

type choiceView struct {
	Value   Choice
	Label   string
	Checked bool
}

var choiceLabels = map[Choice]string{
	ChoiceSucceed: "The payment goes through",
	ChoiceFail:    "The card is declined",
	ChoiceLate:    "It goes through, but the provider's notice comes late (after the hold has run out)",
	ChoiceTwice:   "It goes through, and the provider's notice comes twice",
	ChoiceNever:   "It goes through, but the notice never comes (the booking core has to ask)",
}

// firstChoice is the outcome the page offers first: the configured one.
func (s *Simulator) firstChoice() Choice {
	switch {
	case s.cfg.Drop:
		return ChoiceNever
	case s.cfg.Duplicate:
		return ChoiceTwice
	case s.cfg.Outcome == "fail":
		return ChoiceFail
	}
	return ChoiceSucceed
}

func (s *Simulator) page(w http.ResponseWriter, r *http.Request) {
	rec, err := s.store.Get(r.Context(), r.PathValue("paymentId"))
	if err != nil {
		s.pageError(w, r, err)
		return
	}
	now := s.now()
	v := pageView{
		ID: rec.PaymentID, Description: rec.Description, Amount: FormatAmount(rec.AmountCents, rec.Currency),
		ReturnURL: rec.ReturnURL, Title: "Pay for your tickets",
	}
	switch st := effective(rec, now); {
	case rec.DecidedAt == nil:
		v.State, v.Late = "open", now.After(rec.ExpiresAt)
		first := s.firstChoice()
		for _, c := range PageChoices {
			v.Choices = append(v.Choices, choiceView{Value: c, Label: choiceLabels[c], Checked: c == first})
		}
	case st == Pending:
		v.State, v.Title, v.Words = "processing", "Payment in progress", "The provider is still processing this payment."
	case rec.Choice == ChoiceExpired:
		v.State, v.Title, v.Words = "expired", "This payment has expired", "Nobody paid in time, so nothing was charged."
	case rec.Choice == ChoiceCancel:
		v.State, v.Title, v.Words = "cancelled", "Payment cancelled", "You cancelled this payment. Nothing was charged."
	case st == Failed:
		v.State, v.Title, v.Words = "declined", "Payment declined", "The card was declined. Nothing was charged."
	case rec.RefundedAt != nil:
		v.State, v.Title, v.Words = "paid", "Payment refunded", "This payment went through and has since been refunded."
	default:
		v.State, v.Title, v.Words = "paid", "Payment received", "This payment went through."
	}
	s.render(w, http.StatusOK, v, rec.ReturnURL)
}

// maxForm bounds the decision's form body.
const maxForm = 4 << 10

func (s *Simulator) decide(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad form", http.StatusBadRequest)
		return
	}
	c := Choice(r.PostForm.Get("outcome"))
	if _, ok := choiceLabels[c]; !ok {
		c = s.firstChoice()
	}
	switch r.PostForm.Get("action") {
	case "cancel":
		c = ChoiceCancel
	case "pay":
	default:
		http.Error(w, "action must be pay or cancel", http.StatusBadRequest)
		return
	}
	rec, ok, err := s.Decide(r.Context(), r.PathValue("paymentId"), c)
	if err != nil {
		s.pageError(w, r, err)
		return
	}
	// Decided now: back to the booking, as a provider returns the fan.
	// Decided before (a second click, or expired): the page says how it
	// stands, with the way back.
	to := rec.ReturnURL
	if !ok || to == "" {
		to = "/pay/" + url.PathEscape(rec.PaymentID)
	}
	http.Redirect(w, r, to, http.StatusSeeOther)
}

func (s *Simulator) pageError(w http.ResponseWriter, r *http.Request, err error) {
	v := pageView{State: "missing", Title: "No such payment", Words: "This payment link is not valid. Go back to the booking page and press Pay again."}
	code := http.StatusNotFound
	if !errors.Is(err, ErrUnknownPayment) {
		s.log.Warn("simulator: payment page", "method", r.Method, "err", err)
		v = pageView{State: "unavailable", Title: "Payments are unavailable", Words: "The payment page cannot be shown right now. Try again in a moment."}
		code = http.StatusServiceUnavailable
		w.Header().Set("Retry-After", "2")
	}
	s.render(w, code, v, "")
}

func (s *Simulator) render(w http.ResponseWriter, code int, v pageView, returnURL string) {
	var b bytes.Buffer
	if err := pageTmpl.Execute(&b, v); err != nil {
		s.log.Error("simulator: page template", "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Content-Security-Policy", csp(returnURL))
	w.WriteHeader(code)
	_, _ = w.Write(b.Bytes())
}

// csp is the page's policy: nothing but its own style, and forms that post
// to itself; form-action also names the return URL's origin, since
// browsers hold the redirect after a form post to it.
func csp(returnURL string) string {
	formAction := "'self'"
	if u, err := url.Parse(returnURL); err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" {
		formAction += " " + u.Scheme + "://" + u.Host
	}
	return "default-src 'none'; style-src 'self'; img-src 'self'; form-action " + formAction +
		"; base-uri 'none'; frame-ancestors 'none'"
}

// zeroDecimal are the ISO 4217 currencies without a minor unit: their
// *_cents amounts are whole units.
var zeroDecimal = map[string]bool{
	"BIF": true, "CLP": true, "DJF": true, "GNF": true, "ISK": true, "JPY": true, "KMF": true, "KRW": true,
	"PYG": true, "RWF": true, "UGX": true, "VND": true, "VUV": true, "XAF": true, "XOF": true, "XPF": true,
}

var symbols = map[string]string{"USD": "$", "EUR": "€", "GBP": "£", "JPY": "¥", "KRW": "₩"}

// FormatAmount writes an amount in its currency's minor unit for people:
// $39.00, ¥1,500, or "CHF 12.50" for a currency without a symbol here.
func FormatAmount(minor int64, currency string) string {
	neg := minor < 0
	if neg {
		minor = -minor
	}
	var num string
	if zeroDecimal[currency] {
		num = thousands(minor)
	} else {
		num = thousands(minor/100) + "." + pad2(minor%100)
	}
	if neg {
		num = "-" + num
	}
	if sym, ok := symbols[currency]; ok {
		return sym + num
	}
	return strings.TrimSpace(currency + " " + num)
}

func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func pad2(n int64) string {
	if n < 10 {
		return "0" + strconv.FormatInt(n, 10)
	}
	return strconv.FormatInt(n, 10)
}
