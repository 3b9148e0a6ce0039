package tasks

import (
	"context"

	"github.com/hookwheel/hookwheel/internal/model"
)

// Nodes lists the live dispatcher nodes, oldest first, with the partitions
// of tasks each holds, and how many of the model.Partitions none holds: the
// ones whose tasks nobody sends until a node takes them over.
func (s *Service) Nodes(ctx context.Context) (nodes []model.Node, unowned int, err error) {
	nodes, err = s.store.ListNodes(ctx)
	if err != nil {
		return nil, 0, err
	}
	unowned = model.Partitions
	for _, n := range nodes {
		unowned -= len(n.Partitions)
	}
	return nodes, unowned, nil
}
