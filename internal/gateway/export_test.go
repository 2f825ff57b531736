package gateway

// ForwardAuths is waitroom_forward_auth_total, for tests to read.
var ForwardAuths = forwardAuths
