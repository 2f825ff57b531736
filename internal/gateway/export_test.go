package gateway

// ForwardAuths is waitroom_forward_auth_total, for tests to read.
var ForwardAuths = forwardAuths

// EndHeard reports whether the gate heard that ticket's active place in
// event ended early (it keeps refusing its passes while Redis is away).
func (s *Server) EndHeard(event, ticket string) bool { return s.keeper.Heard(event, ticket) }

// StraightThrough is waitroom_straight_through_total, for tests to read.
var StraightThrough = straightThrough

// TicketsIssued is waitroom_tickets_issued_total, for tests to read.
var TicketsIssued = ticketsIssued

// PassesReissued is waitroom_passes_reissued_total, for tests to read.
var PassesReissued = passesReissued

// LineRemembered is how long a gateway sends visitors with no pass to the
// room after it saw an auto event refuse one a place straight through.
const LineRemembered = lineRemembered
