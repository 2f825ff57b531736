package queue

import (
	"context"
	"errors"

	"github.com/waitroom/waitroom/internal/line"
)

// TickDyingAfter runs a sharded tick's steps up to step ("take": fans
// moved out of line, not yet in; "accept": in, the handover not cleared)
// and stops there, as a process killed then would: its lease is kept, its
// handover left for the next tick to finish.
func (s *Store) TickDyingAfter(ctx context.Context, event string, set line.Settings, step string) error {
	h, err := s.beginHandover(ctx, event, set)
	switch {
	case err != nil:
		return err
	case h.out.Busy:
		return errors.New("another replica ticks")
	}
	if err := h.prepare(); err != nil {
		return err
	}
	if h.taking == 0 {
		return errors.New("nobody to take")
	}
	if err := h.takeFronts(); err != nil || step == "take" {
		return err
	}
	return h.accept()
}

// JoinHalfway runs a sharded join's phase on the event's tag alone, as a
// gateway that stalls between the two would; finish runs its shard's
// phase.
func (s *Store) JoinHalfway(ctx context.Context, event string, set line.Settings) (finish func() (line.JoinResult, error), err error) {
	b, err := s.joinBegin(ctx, event, set, line.JoinOptions{}, "")
	if err != nil {
		return nil, err
	}
	return func() (line.JoinResult, error) { return s.joinEnd(ctx, event, set, b) }, nil
}
