package rdb

import (
	"fmt"
	"strconv"
)

// Reply reads a script's array reply by position, remembering the first
// element that is missing or not what was asked: read everything, then
// check Err once.
type Reply struct {
	v   []any
	err error
}

// ReplyOf is a reader of v.
func ReplyOf(v []any) *Reply { return &Reply{v: v} }

// Err is the first mismatch met, or nil.
func (r *Reply) Err() error { return r.err }

// Len is the reply's length.
func (r *Reply) Len() int { return len(r.v) }

// At is element i as Redis answered it (nil, and a mismatch, past the end).
func (r *Reply) At(i int) any {
	if i >= len(r.v) {
		if r.err == nil {
			r.err = fmt.Errorf("reply %v has no element %d", r.v, i)
		}
		return nil
	}
	return r.v[i]
}

// Str is element i as a string ("" if it is not one).
func (r *Reply) Str(i int) string {
	s, _ := r.At(i).(string)
	return s
}

// Int is element i as an integer (an integer reply or a decimal string).
func (r *Reply) Int(i int) int64 {
	return number(r, i, func(n int64) int64 { return n }, func(s string) (int64, error) { return strconv.ParseInt(s, 10, 64) })
}

// Float is element i as a float (floats come back as strings: Redis
// truncates Lua numbers in replies to integers).
func (r *Reply) Float(i int) float64 {
	return number(r, i, func(n int64) float64 { return float64(n) }, func(s string) (float64, error) { return strconv.ParseFloat(s, 64) })
}

// number reads element i, an integer reply or a string, as a T.
func number[T int64 | float64](r *Reply, i int, fromInt func(int64) T, parse func(string) (T, error)) T {
	switch x := r.At(i).(type) {
	case int64:
		return fromInt(x)
	case string:
		v, err := parse(x)
		if err != nil && r.err == nil {
			r.err = err
		}
		return v
	}
	if r.err == nil {
		r.err = fmt.Errorf("reply element %d is %T", i, r.At(i))
	}
	return 0
}

// Num is a reply element or a HMGET value as an integer (0 when absent or
// not a number).
func Num(x any) int64 {
	switch v := x.(type) {
	case int64:
		return v
	case string:
		n, _ := strconv.ParseInt(v, 10, 64)
		return n
	}
	return 0
}

// Args are strings as a command's or a script's arguments.
func Args(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}
