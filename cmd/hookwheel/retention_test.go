package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/dispatcher"
)

func TestRetentionEnv(t *testing.T) {
	t.Parallel()
	tests := []struct {
		value   string
		want    time.Duration
		wantErr bool
	}{
		{value: "", want: 0}, // the dispatcher's default
		{value: "720h", want: 720 * time.Hour},
		{value: "1s", want: time.Second},
		{value: "0", want: dispatcher.KeepForever},
		{value: "0s", want: dispatcher.KeepForever},
		{value: "999ms", wantErr: true},
		{value: "-1h", wantErr: true},
		{value: "7d", wantErr: true},
		{value: "forever", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.value, func(t *testing.T) {
			t.Parallel()
			got, err := retentionEnv(tt.value)
			if tt.wantErr {
				require.ErrorContains(t, err, "HOOKWHEEL_RETENTION")
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestAuditRetentionEnv(t *testing.T) {
	t.Parallel()
	tests := []struct {
		value   string
		want    time.Duration
		wantErr bool
	}{
		{value: "", want: 0}, // the dispatcher's default, 400 days
		{value: "9600h", want: 400 * 24 * time.Hour},
		{value: "0", want: dispatcher.KeepForever},
		{value: "-1h", wantErr: true},
		{value: "400d", wantErr: true},
	}
	for _, tt := range tests {
		got, err := auditRetentionEnv(tt.value)
		if tt.wantErr {
			require.ErrorContains(t, err, "HOOKWHEEL_AUDIT_RETENTION", tt.value)
			continue
		}
		require.NoError(t, err, tt.value)
		require.Equal(t, tt.want, got, tt.value)
	}
	env, err := loadEnv(func(name string) string {
		if name == "HOOKWHEEL_AUDIT_RETENTION" {
			return "720h"
		}
		return ""
	})
	require.NoError(t, err)
	require.Equal(t, 720*time.Hour, env.auditRetention)
}
