package gateway

import (
	"context"
	"errors"
	"math"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/waitroom/waitroom/internal/config"
	"github.com/waitroom/waitroom/internal/line"
	"github.com/waitroom/waitroom/internal/platform/periodic"
	"github.com/waitroom/waitroom/internal/policy"
)

// settingsEvery is how often the gateway re-reads the settings the
// admitter published: it republishes every tick, so twice a second is as
// fresh as it gets, and no fan's request waits on that read.
const settingsEvery = 500 * time.Millisecond

// refreshSettings keeps the settings in force in memory until ctx ends.
func (s *edge) refreshSettings(ctx context.Context) {
	periodic.Run(ctx, periodic.Every(settingsEvery), s.loadSettings)
}

func (s *edge) loadSettings(ctx context.Context) {
	cfg := s.config()
	for i := range cfg.Events {
		ev := &cfg.Events[i]
		set, err := s.line.Settings(ctx, ev.ID)
		switch {
		case errors.Is(err, line.ErrNoSettings):
			set = policy.SettingsFor(*ev)
		case err != nil:
			continue // Redis hiccup: the last known settings stay
		}
		s.settingsMu.Lock()
		s.settings[ev.ID] = set
		s.settingsMu.Unlock()
	}
}

// settingsFor returns the settings in force for ev: those the admitter
// published, else (until one has) the config's.
func (s *edge) settingsFor(ev *config.Event) line.Settings {
	s.settingsMu.RLock()
	set, ok := s.settings[ev.ID]
	s.settingsMu.RUnlock()
	if !ok {
		return policy.SettingsFor(*ev)
	}
	return set
}

// An event's states as the event route and the pages tell them (DESIGN.md).
const (
	statePrequeue    = "prequeue"
	stateOpen        = "open"
	statePaused      = "paused"
	statePassthrough = "passthrough"
	stateAuto        = "auto" // open, straight through while there is room: waiting says whether a line formed
	stateClosed      = "closed"
	stateSoldOut     = "soldout"
)

// state is the event's state as the API reports it.
func state(set line.Settings, inv line.Inventory, now time.Time) string {
	switch {
	case set.Mode == line.ModeClosed || (set.ClosesAt != nil && !now.Before(*set.ClosesAt)):
		return stateClosed
	case inv.SoldOut():
		return stateSoldOut
	case set.Mode == line.ModePaused:
		return statePaused
	case set.Mode == line.ModePassthrough:
		return statePassthrough
	case set.OpensAt != nil && now.Before(*set.OpensAt):
		return statePrequeue
	case set.Mode == line.ModeAuto:
		return stateAuto
	}
	return stateOpen
}

// EventsLine is what the events' routes and the metrics' collector
// (collector.go) ask of the line: its figures.
type EventsLine interface {
	Counts(ctx context.Context, event string) (line.Counts, error)
}

// eventsAPI is the events' routes: each event, its state and figures.
type eventsAPI struct {
	*edge
	line EventsLine
}

type showtimeJSON struct {
	ID       int64     `json:"id"`
	Title    string    `json:"title"`
	StartsAt time.Time `json:"startsAt"`
}

type eventJSON struct {
	ID             string         `json:"id"`
	Name           string         `json:"name"`
	State          string         `json:"state"`
	Waiting        int64          `json:"waiting"`
	Active         int64          `json:"active"`
	MaxActive      int            `json:"maxActive"`
	AdmitPerSecond float64        `json:"admitPerSecond"`
	Available      *int64         `json:"available"` // null until the booking core publishes the inventory
	Held           *int64         `json:"held"`
	OpensAt        *time.Time     `json:"opensAt"`
	ClosesAt       *time.Time     `json:"closesAt,omitempty"`
	Showtimes      []showtimeJSON `json:"showtimes"`
}

func (s *eventsAPI) eventInfo(ctx context.Context, ev *config.Event) (eventJSON, error) {
	set := s.settingsFor(ev)
	counts, err := s.line.Counts(ctx, ev.ID)
	if err != nil {
		return eventJSON{}, err
	}
	out := eventJSON{
		ID: ev.ID, Name: ev.Name, State: state(set, counts.Inventory, s.now()),
		Waiting: counts.Waiting, Active: counts.Active,
		MaxActive: set.MaxActive, AdmitPerSecond: displayRate(set.AdmitPerSecond),
		OpensAt: set.OpensAt, ClosesAt: set.ClosesAt,
		Showtimes: make([]showtimeJSON, 0, len(ev.Showtimes)),
	}
	if inv := counts.Inventory; inv.Known {
		available, held := max(inv.Available, 0), inv.Held
		out.Available, out.Held = &available, &held
	}
	for _, st := range ev.Showtimes {
		out.Showtimes = append(out.Showtimes, showtimeJSON{ID: st.ID, Title: st.Title, StartsAt: st.StartsAt})
	}
	return out, nil
}

// displayRate is the rate as the event route shows it, to two decimals: the
// computed 1000 TPS / (3 × 2) reads 166.67, not 166.66666666666666. Display
// only: the admitter and the token bucket use the rate unrounded. A rate too
// small for two decimals is shown as it is rather than as 0, which would
// read as "admitting nobody".
func displayRate(r float64) float64 {
	if d := math.Round(r*100) / 100; d > 0 || r <= 0 {
		return d
	}
	return r
}

func (s *edge) event(c *fiber.Ctx) (*config.Event, error) {
	ev, ok := s.config().Event(c.Params("event"))
	if !ok {
		return nil, errUnknownEvent
	}
	return ev, nil
}

// everyEvent is f of every event of cfg, in the config's order.
func everyEvent[T any](ctx context.Context, cfg *config.Config, f func(context.Context, *config.Event) (T, error)) ([]T, error) {
	out := make([]T, 0, len(cfg.Events))
	for i := range cfg.Events {
		v, err := f(ctx, &cfg.Events[i])
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

func (s *eventsAPI) listEvents(c *fiber.Ctx) error {
	out, err := everyEvent(c.UserContext(), s.config(), s.eventInfo)
	if err != nil {
		return err
	}
	noStore(c)
	return c.JSON(fiber.Map{"events": out})
}

func (s *eventsAPI) getEvent(c *fiber.Ctx) error {
	ev, err := s.event(c)
	if err != nil {
		return err
	}
	info, err := s.eventInfo(c.UserContext(), ev)
	if err != nil {
		return err
	}
	noStore(c)
	return c.JSON(info)
}
