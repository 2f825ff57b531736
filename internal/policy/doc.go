// Package policy is what an event's config puts in force on its line: the
// capacity model (the computed rate and cap), the settings the admitter
// publishes, and the operators' overrides laid over them, with where each
// setting comes from. The admitter and the gateway both read it; neither
// imports the other.
package policy
