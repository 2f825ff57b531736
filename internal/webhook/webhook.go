// Package webhook is the room's notifications to its operators' programs
// (DESIGN.md, "Webhooks"): moments (a sale opened, paused, sold out; an
// auto line formed or cleared; a draw published; settings changed; the
// booking core struggling) become deliveries to every receiver the config
// names for their type, kept in
// the event's outbox in Redis, and a Sender POSTs each one signed as the
// Standard Webhooks specification says, at least once, in order per event
// and receiver, retried with backoff for an hour.
//
// One moment is one delivery id whoever races to notice it: a moment of
// state (the sale's, the booking core's, a draw published) is made inside
// the script that compares and sets the state last announced for its
// event (Store.Observe), so of any number of admitters exactly one makes
// it; a moment a caller makes (settings.changed) carries an id derived from
// what it is, and queueing it again queues nothing (Store.Enqueue).
//
// A delivery waits for the earlier ones of its event and receiver: the
// sender takes only the head of each receiver's line (a claim, with a
// visibility timeout: two senders never make the same delivery at once,
// and a dead sender's is taken up again once its claim lapses). A receiver
// that answers 410 Gone gets no delivery more, until the config names it
// again.
package webhook

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strings"
	"time"
)

// The notifications' types (DESIGN.md, "Webhooks").
const (
	SaleOpened       = "sale.opened"
	SalePaused       = "sale.paused"
	SaleResumed      = "sale.resumed"
	SaleClosed       = "sale.closed"
	SaleSoldOut      = "sale.soldout"
	LineFormed       = "line.formed"
	LineCleared      = "line.cleared"
	LotteryDrawn     = "lottery.drawn"
	SelectionDrawn   = "selection.drawn"
	SettingsChanged  = "settings.changed"
	BookingDegraded  = "booking.degraded"
	BookingRecovered = "booking.recovered"
)

// Types lists every type, for the metrics' series.
var Types = []string{SaleOpened, SalePaused, SaleResumed, SaleClosed, SaleSoldOut, LineFormed, LineCleared,
	LotteryDrawn, SelectionDrawn, SettingsChanged, BookingDegraded, BookingRecovered}

// Statuses of a delivery, as the delivery log shows them.
const (
	StatusPending   = "pending"   // not yet made, or being retried
	StatusDelivered = "delivered" // the receiver answered 2xx
	StatusFailed    = "failed"    // given up after MaxAge of failed attempts
	StatusGone      = "gone"      // the receiver answered 410 Gone (to it or to an earlier one)
)

// Endpoint is one receiver, as the config names it.
type Endpoint struct {
	URL string
	// Key is the signing key (the bytes of its whsec_ secret).
	Key []byte
	// Types are the types it wants; nil = every type.
	Types []string
}

// ID names the receiver's line in Redis: its URL's hash (a new secret or
// new types keep the line and its order).
func (e Endpoint) ID() string {
	s := sha256.Sum256([]byte(e.URL))
	return hex.EncodeToString(s[:8])
}

// Identity is the receiver as the config names it, URL, key and types:
// what a 410 Gone marks, so that a config naming it otherwise (a new
// secret, other types) has it receive again.
func (e Endpoint) Identity() string {
	h := sha256.New()
	h.Write([]byte(e.URL))
	h.Write([]byte{0})
	h.Write(e.Key)
	h.Write([]byte{0})
	h.Write([]byte(strings.Join(e.Types, ",")))
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// Wants reports whether the receiver wants moments of type t.
func (e Endpoint) Wants(t string) bool { return e.Types == nil || slices.Contains(e.Types, t) }

// types is Types as the scripts read them: "*", or ",a,b,".
func (e Endpoint) types() string {
	if e.Types == nil {
		return "*"
	}
	return "," + strings.Join(e.Types, ",") + ","
}

// Moment is a notification a caller makes (the scripts make the others).
type Moment struct {
	Type  string
	Event string
	// Key is what makes this moment itself among those of its type and
	// event (for settings.changed: who, what, and when): with them it
	// derives the moment's id, so the same moment queued twice is queued
	// once.
	Key  string
	Data any // the body's data, marshalled to JSON
}

// ID is the moment's webhook-id: derived from its event, type and key;
// no '.' in it, as the specification asks.
func (m Moment) ID() string {
	s := sha256.Sum256([]byte(m.Event + "\x00" + m.Type + "\x00" + m.Key))
	return "msg_" + hex.EncodeToString(s[:12])
}

// Change is one setting's change in settings.changed.
type Change struct {
	From any `json:"from"`
	To   any `json:"to"`
}

// SettingsData is settings.changed's data: what changed, and who (a
// token's name, "admin", or "config").
type SettingsData struct {
	Changes map[string]Change `json:"changes"`
	By      string            `json:"by"`
}

// Delivery is one line of the delivery log.
type Delivery struct {
	ID       string    `json:"id"` // the moment's webhook-id
	Type     string    `json:"type"`
	Event    string    `json:"event"`
	URL      string    `json:"url"`
	Attempts int       `json:"attempts"`
	Status   string    `json:"status"`
	At       time.Time `json:"at"`                  // when the moment happened
	Error    string    `json:"lastError,omitempty"` // the last failed attempt's
	seq      int64
}

// stored is a moment as the outbox keeps it (the scripts write it too).
type stored struct {
	Type  string          `json:"type"`
	Event string          `json:"event"`
	AtMs  int64           `json:"atMs"`
	Data  json.RawMessage `json:"data"`
}

// body is the JSON POSTed for a stored moment: the same bytes at every
// attempt, whichever sender makes it.
func (s stored) body() ([]byte, error) {
	return json.Marshal(struct {
		Type  string          `json:"type"`
		Event string          `json:"event"`
		At    string          `json:"at"`
		Data  json.RawMessage `json:"data"`
	}{s.Type, s.Event, time.UnixMilli(s.AtMs).UTC().Format(time.RFC3339Nano), s.Data})
}
