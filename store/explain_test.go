package store_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
)

// planFacts walks an EXPLAIN (FORMAT JSON) plan.
type planFacts struct {
	nodeTypes  []string
	indexNames []string
	seqScans   []string         // relations read by a Seq Scan
	tasksDue   []map[string]any // the nodes that read the tasks_due index
	// relationReads counts, per relation, how many times a plan node read
	// it (the node's loops): a probe per row shows as one per row.
	relationReads map[string]float64
}

func walkPlan(node map[string]any, f *planFacts) {
	nodeType, _ := node["Node Type"].(string)
	f.nodeTypes = append(f.nodeTypes, nodeType)
	if name, ok := node["Index Name"].(string); ok {
		f.indexNames = append(f.indexNames, name)
		if name == "tasks_due" {
			f.tasksDue = append(f.tasksDue, node)
		}
	}
	rel, _ := node["Relation Name"].(string)
	if nodeType == "Seq Scan" {
		f.seqScans = append(f.seqScans, rel)
	}
	if loops, ok := node["Actual Loops"].(float64); ok && rel != "" {
		if f.relationReads == nil {
			f.relationReads = make(map[string]float64)
		}
		f.relationReads[rel] += loops
	}
	children, _ := node["Plans"].([]any)
	for _, c := range children {
		walkPlan(c.(map[string]any), f)
	}
}

// topPlan is the top plan node of EXPLAIN (FORMAT JSON) output.
func topPlan(t testing.TB, out []byte) map[string]any {
	t.Helper()
	var doc []map[string]any
	require.NoError(t, json.Unmarshal(out, &doc), "%s", out)
	require.Len(t, doc, 1)
	plan, ok := doc[0]["Plan"].(map[string]any)
	require.True(t, ok, "%s", out)
	return plan
}

func sharedBlocks(plan map[string]any) int {
	hit, _ := plan["Shared Hit Blocks"].(float64)
	read, _ := plan["Shared Read Blocks"].(float64)
	return int(hit + read)
}

// btreeHeight is how many pages a descent of the btree index reads, root to
// leaf, from its metapage.
func btreeHeight(t *testing.T, pool *pgxpool.Pool, index string) int {
	t.Helper()
	exec(t, pool, `CREATE EXTENSION IF NOT EXISTS pageinspect`)
	var level int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT level FROM bt_metap($1)`, index).Scan(&level))
	return level + 1
}
