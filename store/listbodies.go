package store

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// A list with bodies (ListTasksWithBodies, ListSchedulesWithBodies) reads
// its page in one statement of two steps, so that a page of large bodies
// never reads more than its byte budget. Its CTE "page" first chooses the
// page as the list without bodies chooses it, selecting only pageBodyBytes
// (octet_length reads a stored value's size from its header, not the value);
// fittingPage then sums the sizes in list order, and the statement reads the
// bodies of the longest run of items from the first whose sum fits in the
// budget, the first item always:
//
//	WHERE n = 1 OR running <= <budget>

// pageBodyBytes are the columns of a list's CTE "page": each item's id and
// the size of its body.
const pageBodyBytes = `id AS page_id, coalesce(octet_length(body), 0) AS body_bytes`

// fittingPage is the CTE "fitting", the page's items numbered in list order
// (newest first) with the running sum of their bodies' sizes; page_rows is
// how many items the page had before the budget cut it.
const fittingPage = `fitting AS (
	SELECT page_id, count(*) OVER () AS page_rows,
		row_number() OVER w AS n, sum(body_bytes) OVER w AS running
	FROM page
	WINDOW w AS (ORDER BY page_id DESC ROWS UNBOUNDED PRECEDING)
)`

// listWithinBudget runs query, a list with bodies whose rows are an item's
// columns followed by page_rows, and reads each row with scan. cut says that
// the budget ended the list before the page did.
func listWithinBudget[T any](ctx context.Context, q Querier, query string, args []any,
	scan func(row pgx.Row, extra ...any) (T, error)) (items []T, cut bool, err error) {
	rows, err := q.Query(ctx, query, args...)
	if err != nil {
		return nil, false, err
	}
	var pageRows int64
	items, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (T, error) { return scan(r, &pageRows) })
	if err != nil {
		return nil, false, err
	}
	return items, int64(len(items)) < pageRows, nil
}
