package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/model"
)

func TestDefaultLimitsEnv(t *testing.T) {
	t.Parallel()
	defaults := model.DefaultNodeLimits()
	with := func(change func(*model.Limits)) model.Limits {
		l := defaults
		change(&l)
		return l
	}
	tests := []struct {
		name    string
		env     map[string]string
		want    model.Limits
		wantErr string
	}{
		{name: "unset: the documented defaults", env: nil, want: defaults},
		{name: "every field", env: map[string]string{
			"HOOKWHEEL_DEFAULT_API_RATE": "2.5", "HOOKWHEEL_DEFAULT_API_BURST": "5",
			"HOOKWHEEL_DEFAULT_MAX_PENDING_TASKS": "3", "HOOKWHEEL_DEFAULT_MAX_SCHEDULES": "4",
			"HOOKWHEEL_DEFAULT_MAX_TIMEOUT": "45s", "HOOKWHEEL_DEFAULT_DISPATCH_RATE": "6",
			"HOOKWHEEL_DEFAULT_DISPATCH_CONCURRENCY": "7", "HOOKWHEEL_DEFAULT_TASKS_PER_DAY": "8",
			"HOOKWHEEL_DEFAULT_DELIVERIES_PER_DAY": "9",
		}, want: model.Limits{APIRate: 2.5, APIBurst: 5, MaxPendingTasks: 3, MaxSchedules: 4, MaxTimeout: 45 * time.Second,
			DispatchRate: 6, DispatchConcurrency: 7, TasksPerDay: 8, DeliveriesPerDay: 9}},
		{name: "0 lifts one", env: map[string]string{"HOOKWHEEL_DEFAULT_MAX_PENDING_TASKS": "0"},
			want: with(func(l *model.Limits) { l.MaxPendingTasks = 0 })},
		{name: "unlimited lifts one", env: map[string]string{"HOOKWHEEL_DEFAULT_DISPATCH_RATE": "unlimited"},
			want: with(func(l *model.Limits) { l.DispatchRate = 0 })},
		{name: "no API rate drops the burst", env: map[string]string{"HOOKWHEEL_DEFAULT_API_RATE": "0"},
			want: with(func(l *model.Limits) { l.APIRate, l.APIBurst = 0, 0 })},
		{name: "max timeout 0", env: map[string]string{"HOOKWHEEL_DEFAULT_MAX_TIMEOUT": "0"},
			want: with(func(l *model.Limits) { l.MaxTimeout = 0 })},
		{name: "a daily quota too large", env: map[string]string{"HOOKWHEEL_DEFAULT_TASKS_PER_DAY": "2000000000"}, wantErr: "HOOKWHEEL_DEFAULT_TASKS_PER_DAY"},
		{name: "negative", env: map[string]string{"HOOKWHEEL_DEFAULT_MAX_SCHEDULES": "-1"}, wantErr: "HOOKWHEEL_DEFAULT_MAX_SCHEDULES"},
		{name: "fraction of a count", env: map[string]string{"HOOKWHEEL_DEFAULT_MAX_PENDING_TASKS": "1.5"}, wantErr: "HOOKWHEEL_DEFAULT_MAX_PENDING_TASKS"},
		{name: "not a number", env: map[string]string{"HOOKWHEEL_DEFAULT_API_RATE": "fast"}, wantErr: "HOOKWHEEL_DEFAULT_API_RATE"},
		{name: "too many", env: map[string]string{"HOOKWHEEL_DEFAULT_DISPATCH_CONCURRENCY": "100001"}, wantErr: "HOOKWHEEL_DEFAULT_DISPATCH_CONCURRENCY"},
		{name: "timeout under 1s", env: map[string]string{"HOOKWHEEL_DEFAULT_MAX_TIMEOUT": "500ms"}, wantErr: "HOOKWHEEL_DEFAULT_MAX_TIMEOUT"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := defaultLimitsEnv(func(name string) string { return tt.env[name] })
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}
