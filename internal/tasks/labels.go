package tasks

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The bounds of a task's (or a schedule's) labels. They keep a label
// readable in a query string and on a command line, and a task row and its
// index entries small: 32 pairs of at most 63 and 255 characters.
const (
	MaxLabels        = 32
	MaxLabelKeyLen   = 63
	MaxLabelValueLen = 255
)

// LabelError is one thing wrong with labels or a label filter: the field
// it is reported under ("labels.team", "label") and why.
type LabelError struct {
	Field   string
	Message string
}

// CheckLabels checks a task's labels as given, each pair under
// "<field>.<key>": at most MaxLabels; each key 1 to MaxLabelKeyLen
// characters of a-z, 0-9, '.', '_', '/' and '-', starting with a letter or
// a digit; each value at most MaxLabelValueLen characters of UTF-8 without
// control characters (an empty value is a value). Nothing is changed or
// dropped: a key in capitals is refused, not lowered. Errors come in key
// order, so that the same labels always give the same answer.
func CheckLabels(field string, labels map[string]string) []LabelError {
	var errs []LabelError
	if len(labels) > MaxLabels {
		errs = append(errs, LabelError{field, fmt.Sprintf("must hold at most %d labels", MaxLabels)})
	}
	for _, key := range slices.Sorted(maps.Keys(labels)) {
		if msg := labelKeyProblem(key); msg != "" {
			errs = append(errs, LabelError{field + "." + key, msg})
			continue
		}
		if msg := labelValueProblem(labels[key], MaxLabelValueLen); msg != "" {
			errs = append(errs, LabelError{field + "." + key, msg})
		}
	}
	return errs
}

// ParseLabelFilter reads the conditions of a label filter, each "key:value"
// (the key may not hold a ':', so the first one splits; the value may hold
// anything a label value may, ':' included), into the labels a task must
// carry. Each is checked by the rules of CheckLabels, and errors are
// reported under field; a key given twice is refused, since a task has one
// value per key.
func ParseLabelFilter(field string, conditions []string) (map[string]string, []LabelError) {
	if len(conditions) == 0 {
		return nil, nil
	}
	var errs []LabelError
	if len(conditions) > MaxLabels {
		errs = append(errs, LabelError{field, fmt.Sprintf("may be given at most %d times: a task carries at most %d labels", MaxLabels, MaxLabels)})
		return nil, errs
	}
	want := make(map[string]string, len(conditions))
	for _, c := range conditions {
		key, value, ok := strings.Cut(c, ":")
		switch {
		case !ok:
			errs = append(errs, LabelError{field, fmt.Sprintf("%q must be key:value, such as team:payments", c)})
		case labelKeyProblem(key) != "":
			errs = append(errs, LabelError{field, fmt.Sprintf("%q: the key %s", c, labelKeyProblem(key))})
		case labelValueProblem(value, MaxLabelValueLen) != "":
			errs = append(errs, LabelError{field, fmt.Sprintf("%q: the value %s", c, labelValueProblem(value, MaxLabelValueLen))})
		default:
			if _, dup := want[key]; dup {
				errs = append(errs, LabelError{field, fmt.Sprintf("names the key %q more than once; a task has one value per key", key)})
				continue
			}
			want[key] = value
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return want, nil
}

// labelKeyProblem says what is wrong with a label key, or "" when nothing.
func labelKeyProblem(key string) string {
	const rule = "must be 1 to 63 characters of a-z, 0-9, '.', '_', '/' and '-', starting with a letter or a digit"
	if key == "" || len(key) > MaxLabelKeyLen {
		return rule
	}
	for i := 0; i < len(key); i++ {
		c := key[i]
		alnum := c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
		if !alnum && (i == 0 || c != '.' && c != '_' && c != '/' && c != '-') {
			return rule
		}
	}
	return ""
}

// MaxOrderingKeyLen is the longest ordering key, in characters.
const MaxOrderingKeyLen = 255

// OrderingKeyProblem says what is wrong with an ordering key, or "" when
// nothing: 1 to MaxOrderingKeyLen characters of UTF-8 without control
// characters, compared byte for byte (nothing is trimmed or folded).
func OrderingKeyProblem(key string) string {
	if key == "" {
		return "must not be empty: leave it out for a task without an ordering key"
	}
	return labelValueProblem(key, MaxOrderingKeyLen)
}

// labelValueProblem says what is wrong with a label value, or "" when
// nothing. Control characters are refused so that a label reads the same
// in a terminal, a log line and the dashboard; NUL could not be stored.
func labelValueProblem(value string, maxLen int) string {
	switch {
	case !utf8.ValidString(value):
		return "must be valid UTF-8"
	case utf8.RuneCountInString(value) > maxLen:
		return fmt.Sprintf("must be at most %d characters", maxLen)
	case strings.IndexFunc(value, unicode.IsControl) >= 0:
		return "must not contain control characters"
	}
	return ""
}
