package api

import (
	"github.com/labstack/echo/v4"

	"github.com/hookwheel/hookwheel/openapi"
)

// Batch ingest and task management. Being built: answers 501 until then.

func (s *Server) CreateTasksBatch(c echo.Context) error                  { return notYet() }
func (s *Server) CancelTasks(c echo.Context) error                       { return notYet() }
func (s *Server) RescheduleTask(c echo.Context, id openapi.TaskID) error { return notYet() }
