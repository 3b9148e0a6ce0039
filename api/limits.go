package api

import (
	"github.com/labstack/echo/v4"
)

// Rate limits and quotas. Being built: answers 501 until then.

func (s *Server) GetLimits(c echo.Context) error { return notYet() }
