package store

import (
	"context"
	"embed"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// The Lua scripts, each opening with a comment that names its KEYS, ARGV and
// return value.
//
//go:embed lua/*.lua
var luaFiles embed.FS

// script is one embedded Lua script and the one way hookwheel runs it: by its
// SHA-1 (EVALSHA), sending the source only when the server does not know it
// yet (NOSCRIPT: first use, a restart, SCRIPT FLUSH). A decision is then one
// round trip, and a batch of them one pipeline.
type script struct {
	*redis.Script
}

// loadScript reads lua/<name>.lua. The files are part of the binary, so a
// missing one is a build mistake.
func loadScript(name string) script {
	src, err := luaFiles.ReadFile("lua/" + name + ".lua")
	if err != nil {
		panic(fmt.Sprintf("store: embedded script %s: %v", name, err))
	}
	return script{redis.NewScript(string(src))}
}

// run evaluates the script once.
func (s script) run(ctx context.Context, c redis.Scripter, keys []string, args ...any) *redis.Cmd {
	return s.Run(ctx, c, keys, args...)
}

// runEach evaluates the script n times in one pipeline, in order, the i-th
// time with the keys and arguments call(i) gives. On NOSCRIPT nothing ran
// (every command of the pipeline failed alike), so the pipeline is sent
// again with the source. The error is the pipeline's: the first failed
// command's, if any; each command keeps its own result.
func (s script) runEach(ctx context.Context, c redis.Cmdable, n int, call func(i int) (keys []string, args []any)) ([]*redis.Cmd, error) {
	pipelined := func(eval func(redis.Pipeliner, []string, []any) *redis.Cmd) ([]*redis.Cmd, error) {
		cmds := make([]*redis.Cmd, n)
		_, err := c.Pipelined(ctx, func(pipe redis.Pipeliner) error {
			for i := range n {
				keys, args := call(i)
				cmds[i] = eval(pipe, keys, args)
			}
			return nil
		})
		return cmds, err
	}
	cmds, err := pipelined(func(pipe redis.Pipeliner, keys []string, args []any) *redis.Cmd {
		return s.EvalSha(ctx, pipe, keys, args...)
	})
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		cmds, err = pipelined(func(pipe redis.Pipeliner, keys []string, args []any) *redis.Cmd {
			return s.Eval(ctx, pipe, keys, args...)
		})
	}
	return cmds, err
}

// scripts are every script the store runs.
type scripts struct {
	claimAttempt   script
	releaseAttempt script
	gcra           script
	dispatchAdmit  script
}

func loadScripts() scripts {
	return scripts{
		claimAttempt:   loadScript("claim_attempt"),
		releaseAttempt: loadScript("release_attempt"),
		gcra:           loadScript("gcra"),
		dispatchAdmit:  loadScript("dispatch_admit"),
	}
}
