package store

import (
	"encoding/json"
	"fmt"
)

// jsonMemo decodes a JSON column whose value repeats from row to row of one
// result, once per distinct value, and hands every row with that value the
// same decoded result. A claim's rows repeat two: every task of a tenant
// carries the tenant's signing secrets, and tasks made by one program mostly
// carry the same headers. JSON decoding was half of a node's cost of reading
// a claimed row (5.6% of its CPU in a 200,000-task burst); decoding each
// distinct value once takes a quarter off the claiming process's CPU per
// batch (BenchmarkClaimTasks). The rows must not change what they share in
// place: claimed rows' headers and secrets are only read (a fresher read of
// the secrets replaces the slice). A memo lives as long as one result.
type jsonMemo[T any] map[string]T

// into is a scan target that decodes its column into *dst through m.
func (m *jsonMemo[T]) into(dst *T) jsonMemoScan[T] { return jsonMemoScan[T]{dst: dst, memo: m} }

type jsonMemoScan[T any] struct {
	dst  *T
	memo *jsonMemo[T]
}

// ScanBytes implements pgtype.BytesScanner: pgx hands it the column's JSON
// (nil for NULL, which leaves *dst as it is) without copying it, valid only
// during the call; only a value seen for the first time is copied, as the
// memo's key.
func (s jsonMemoScan[T]) ScanBytes(raw []byte) error {
	if raw == nil {
		return nil
	}
	if v, ok := (*s.memo)[string(raw)]; ok {
		*s.dst = v
		return nil
	}
	var v T
	if err := json.Unmarshal(raw, &v); err != nil {
		return fmt.Errorf("decode %T: %w", v, err)
	}
	if *s.memo == nil {
		*s.memo = jsonMemo[T]{}
	}
	(*s.memo)[string(raw)] = v
	*s.dst = v
	return nil
}
