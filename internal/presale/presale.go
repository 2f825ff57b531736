// Package presale is what comes before a sale's line (DESIGN.md "Presale"):
// accounts register ahead of the sale; at the close of registration a
// committed draw (package draw, as the lottery's) ranks the registrations;
// the first `selected` ranks are invited, in groups that come in staggered
// windows; the invitations a group leaves unused go, when its window
// closes, to the next ranks on the wait list (top-ups); and access codes
// let fan clubs and partners in, a use per new place.
//
// The line itself (package queue) asks this package's Lua (GateLua,
// CodeLua) in its join script, so an invitation, a window and a code are
// checked and spent in the same atomic step that makes the place. This
// package never imports the line: what it needs of it (which invited
// accounts used their places, how many places are left) it asks through
// Places.
//
// Every key is under the event's hash tag (rdb.Keys): one Cluster slot per
// event, with the line's own keys.
package presale

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/waitroom/waitroom/internal/draw"
	"github.com/waitroom/waitroom/internal/line"
	"github.com/waitroom/waitroom/internal/notify"
	"github.com/waitroom/waitroom/internal/rdb"
)

// Plan is an event's presale as configured (policy.PlanFor builds it).
type Plan struct {
	RegistrationOpensAt  time.Time
	RegistrationClosesAt time.Time // the selection is drawn then
	Selected             int       // registrants invited by the selection, in rank order
	GroupSize            int       // invitations per window
	Window               time.Duration
	OpensAt              time.Time  // group 0's window opens then
	GeneralSaleAt        *time.Time // from then anyone may join (nil: never)
}

// Errors of the presale's routes and of a join it gates.
var (
	// ErrRegistrationClosed: outside the registration window (409).
	ErrRegistrationClosed = errors.New("presale: registration closed")
	// ErrTooManyRegistrations: the account has registered MaxRegistrations
	// times for this event already, withdrawals included (429).
	ErrTooManyRegistrations = errors.New("presale: too many registrations for one account")
	// ErrNotRegistered: the account has no registration (404).
	ErrNotRegistered = errors.New("presale: not registered")
	// ErrNoPresale: the event has no presale (404).
	ErrNoPresale = errors.New("presale: no presale")
	// ErrNotDrawn: the selection is drawn at the close of registration (409).
	ErrNotDrawn = errors.New("presale: selection not drawn yet")
	// ErrAccountRequired: registering, and joining a presale, need an
	// account (401).
	ErrAccountRequired = errors.New("presale: account required")
	// ErrNotInvited: a join of a presale by an account that holds no
	// invitation (403).
	ErrNotInvited = errors.New("presale: not invited")
	// ErrInvitationUsed: a join of a presale by an invited account whose
	// place ended with a confirmed booking: an invitation buys once (403).
	ErrInvitationUsed = errors.New("presale: invitation used")
	// ErrCodeRequired, ErrInvalidCode, ErrCodeUsed: a new place of an event
	// with admission.codes required (403, 403, 409).
	ErrCodeRequired = errors.New("presale: access code required")
	ErrInvalidCode  = errors.New("presale: invalid access code")
	ErrCodeUsed     = errors.New("presale: access code used up")
)

// WindowNotOpen: the account is invited, and its window is not open now:
// it opens at OpensAt (still to come), or it closed at ClosesAt.
type WindowNotOpen struct {
	OpensAt, ClosesAt time.Time
}

func (e WindowNotOpen) Error() string {
	return "presale: window not open (opens " + e.OpensAt.UTC().Format(time.RFC3339) + ")"
}

// Is makes errors.Is(err, ErrWindowNotOpen) true.
func (e WindowNotOpen) Is(target error) bool { return target == ErrWindowNotOpen }

// ErrWindowNotOpen is what every WindowNotOpen is (errors.Is).
var ErrWindowNotOpen = errors.New("presale: window not open")

// Status of a registration (the contract's words).
const (
	Registered  = "registered"
	Selected    = "selected"
	Waitlisted  = "waitlisted"
	NotSelected = "not_selected"
)

// Registration is one account's registration as its fan reads it.
type Registration struct {
	ID     string
	Status string
	Rank   int64 // 0 until drawn
	// The window, for a selected account.
	WindowOpensAt, WindowClosesAt *time.Time
}

// Store is the presale's state in Redis.
type Store struct {
	c       *rdb.Client
	places  Places
	codeKey []byte      // the HMAC key codes are stored under (from auth.ticket_secret)
	seeds   draw.Secret // keys the selection's seed (WithDrawSecret)
	owner   string      // this process, in the selection's lease
	outbox  Outbox      // nil: nobody is emailed

	// Now is the store's clock (nil = time.Now); set it before use. It
	// only says when to look: every window opens and closes by Redis
	// TIME, in the scripts.
	Now func() time.Time
}

// Outbox is where the invited are told their windows (notify.Outbox).
type Outbox interface {
	Enqueue(ctx context.Context, event string, m notify.Message) (bool, error)
}

// MailInvitations makes the admitter's steps email every invited
// registrant who left an address its window (DESIGN.md "Away from the
// page"): at least once, once per registration (the outbox keeps one
// message per kind and key).
func (s *Store) MailInvitations(o Outbox) { s.outbox = o }

func (s *Store) now() time.Time {
	if s.Now == nil {
		return time.Now()
	}
	return s.Now()
}

// WithDrawSecret gives the store the draw secret (config auth.draw_secret)
// its selections' seeds are derived from, and returns it. A store without
// one commits and draws no selection (draw.ErrNoSecret): the gateway
// (whose registration may commit) and the admitter both need it.
func (s *Store) WithDrawSecret(secret []byte) *Store {
	s.seeds = append(draw.Secret(nil), secret...)
	return s
}

// Places is what the presale asks of the line.
type Places interface {
	// PlaceStates says what became of each account's place in event's line.
	PlaceStates(ctx context.Context, event string, accounts []string) ([]line.PlaceState, error)
	// PlacesLeft is how many more fans the sale can serve: the places the
	// booking core says are available, less the fans live in line (waiting
	// or let in). ok is false while the booking core has said nothing.
	PlacesLeft(ctx context.Context, event string) (n int64, ok bool, err error)
}

// PlaceState is what became of an account's place: the line's word
// (line.PlaceState). The names below stay until every user says line's.
type PlaceState = line.PlaceState

// What became of a place (line's).
const (
	NoPlace     = line.NoPlace
	LivePlace   = line.LivePlace
	BookedPlace = line.BookedPlace
	EndedPlace  = line.EndedPlace
)

// New is the presale of the events in Redis c. codeKey is the secret codes
// are hashed with; owner names this process in leases ("" = a name of its
// own: host, pid and a random part).
func New(c *rdb.Client, places Places, codeKey []byte, owner string) *Store {
	if owner == "" {
		host, _ := os.Hostname()
		var r [4]byte
		_, _ = rand.Read(r[:])
		owner = fmt.Sprintf("%s/%d/%x", host, os.Getpid(), r)
	}
	return &Store{c: c, places: places, codeKey: append([]byte(nil), codeKey...), owner: owner}
}
