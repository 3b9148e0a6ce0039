package tasks_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/tasks"
)

func TestCheckLabels(t *testing.T) {
	t.Parallel()
	many := func(n int) map[string]string {
		out := map[string]string{}
		for i := range n {
			out[fmt.Sprintf("k%d", i)] = "v"
		}
		return out
	}
	const keyRule = "must be 1 to 63 characters of a-z, 0-9, '.', '_', '/' and '-', starting with a letter or a digit"
	tests := []struct {
		name   string
		labels map[string]string
		want   []tasks.LabelError // nil: valid
	}{
		{"none", nil, nil},
		{"empty", map[string]string{}, nil},
		{"plain", map[string]string{"team": "payments"}, nil},
		{"every key character", map[string]string{"app.kubernetes.io/name-x_1": "billing"}, nil},
		{"digit first", map[string]string{"2fa": "on"}, nil},
		{"empty value", map[string]string{"flag": ""}, nil},
		{"value with separators", map[string]string{"note": "a:b, c=d"}, nil},
		{"unicode value", map[string]string{"city": "Zürich"}, nil},
		{"longest key", map[string]string{strings.Repeat("k", 63): "v"}, nil},
		{"longest value in characters", map[string]string{"k": strings.Repeat("é", 255)}, nil},
		{"most labels", many(32), nil},

		{"too many", many(33), []tasks.LabelError{{"labels", "must hold at most 32 labels"}}},
		{"empty key", map[string]string{"": "v"}, []tasks.LabelError{{"labels.", keyRule}}},
		{"key too long", map[string]string{strings.Repeat("k", 64): "v"},
			[]tasks.LabelError{{"labels." + strings.Repeat("k", 64), keyRule}}},
		{"capitals are not lowered", map[string]string{"Team": "v"}, []tasks.LabelError{{"labels.Team", keyRule}}},
		{"punctuation first", map[string]string{"-team": "v"}, []tasks.LabelError{{"labels.-team", keyRule}}},
		{"dot first", map[string]string{".team": "v"}, []tasks.LabelError{{"labels..team", keyRule}}},
		{"colon in key", map[string]string{"a:b": "v"}, []tasks.LabelError{{"labels.a:b", keyRule}}},
		{"space in key", map[string]string{"a b": "v"}, []tasks.LabelError{{"labels.a b", keyRule}}},
		{"non-ASCII key", map[string]string{"é": "v"}, []tasks.LabelError{{"labels.é", keyRule}}},
		{"value too long", map[string]string{"k": strings.Repeat("v", 256)},
			[]tasks.LabelError{{"labels.k", "must be at most 255 characters"}}},
		{"control character", map[string]string{"k": "a\nb"}, []tasks.LabelError{{"labels.k", "must not contain control characters"}}},
		{"NUL", map[string]string{"k": "a\x00b"}, []tasks.LabelError{{"labels.k", "must not contain control characters"}}},
		{"invalid UTF-8", map[string]string{"k": "a\xffb"}, []tasks.LabelError{{"labels.k", "must be valid UTF-8"}}},
		{"every error, in key order", map[string]string{"b": "\t", "A": "v", "ok": "v"}, []tasks.LabelError{
			{"labels.A", keyRule}, {"labels.b", "must not contain control characters"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, tasks.CheckLabels("labels", tt.labels))
		})
	}
}

func TestParseLabelFilter(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		conditions []string
		want       map[string]string
		wantErr    string // a part of the only error, "" for none
	}{
		{"none", nil, nil, ""},
		{"one", []string{"team:payments"}, map[string]string{"team": "payments"}, ""},
		{"several", []string{"team:payments", "env:prod"}, map[string]string{"team": "payments", "env": "prod"}, ""},
		{"the first colon splits", []string{"note:a:b"}, map[string]string{"note": "a:b"}, ""},
		{"empty value", []string{"flag:"}, map[string]string{"flag": ""}, ""},
		{"comma in value", []string{"note:a,b"}, map[string]string{"note": "a,b"}, ""},
		{"most conditions", func() []string {
			out := make([]string, 32)
			for i := range out {
				out[i] = fmt.Sprintf("k%d:v", i)
			}
			return out
		}(), nil, ""},

		{"no colon", []string{"team=payments"}, nil, `"team=payments" must be key:value`},
		{"empty key", []string{":payments"}, nil, "the key must be 1 to 63 characters"},
		{"capital key", []string{"Team:payments"}, nil, "the key must be 1 to 63 characters"},
		{"value too long", []string{"k:" + strings.Repeat("v", 256)}, nil, "the value must be at most 255 characters"},
		{"control character", []string{"k:a\rb"}, nil, "the value must not contain control characters"},
		{"key twice", []string{"team:a", "team:b"}, nil, `names the key "team" more than once`},
		{"too many", make([]string, 33), nil, "may be given at most 32 times"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, errs := tasks.ParseLabelFilter("label", tt.conditions)
			if tt.wantErr == "" {
				require.Empty(t, errs)
				if tt.want != nil {
					require.Equal(t, tt.want, got)
				} else {
					require.Len(t, got, len(tt.conditions))
				}
				return
			}
			require.Nil(t, got)
			require.Len(t, errs, 1, "%v", errs)
			require.Equal(t, "label", errs[0].Field)
			require.Contains(t, errs[0].Message, tt.wantErr)
		})
	}
}
