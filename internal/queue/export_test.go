package queue

import "errors"

// DieAfter makes the Store's sharded ticks stop dead after step ("take":
// fans moved out of line, not yet in; "accept": in, the handover not
// cleared), as a process killed there would; "" undoes it.
func (s *Store) DieAfter(step string) {
	if step == "" {
		s.tickFault = nil
		return
	}
	s.tickFault = func(at string) error {
		if at == step {
			return errors.New("died after " + step)
		}
		return nil
	}
}
