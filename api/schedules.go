package api

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/hookwheel/hookwheel/openapi"
)

// Recurring schedules. Being built: answers 501 until then.

func notYet() error {
	return newProblem(http.StatusNotImplemented, "not-implemented", "Not implemented", "this endpoint is being built")
}

func (s *Server) CreateSchedule(c echo.Context) error                               { return notYet() }
func (s *Server) ListSchedules(c echo.Context, p openapi.ListSchedulesParams) error { return notYet() }
func (s *Server) GetSchedule(c echo.Context, id openapi.ScheduleID) error           { return notYet() }
func (s *Server) DeleteSchedule(c echo.Context, id openapi.ScheduleID) error        { return notYet() }
func (s *Server) PauseSchedule(c echo.Context, id openapi.ScheduleID) error         { return notYet() }
func (s *Server) ResumeSchedule(c echo.Context, id openapi.ScheduleID) error {
	return notYet()
}
func (s *Server) NextScheduleTimes(c echo.Context, id openapi.ScheduleID, p openapi.NextScheduleTimesParams) error {
	return notYet()
}
