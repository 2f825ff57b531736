package pass

import "strings"

// Bearer is the token of an Authorization header of the Bearer scheme
// (RFC 6750: the scheme's name in any case, then the token, spaces
// around it trimmed), and whether the header was one with a token. Every
// edge reads its credentials through it: the gate's and the booking core's
// passes, the operators' tokens.
func Bearer(authorization string) (token string, ok bool) {
	const scheme = "bearer "
	if len(authorization) < len(scheme) || !strings.EqualFold(authorization[:len(scheme)], scheme) {
		return "", false
	}
	token = strings.TrimSpace(authorization[len(scheme):])
	return token, token != ""
}
