package booking

// PassBudget bounds one pass of a background job.
const PassBudget = passBudget

// EndHeard reports whether the handler heard that ticket's active place in
// event ended early (it keeps refusing its passes while Redis is away).
func (h *Handler) EndHeard(event, ticket string) bool { return h.keeper.Heard(event, ticket) }
