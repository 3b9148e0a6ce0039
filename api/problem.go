package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/hookwheel/hookwheel/openapi"
)

// problemTypePrefix names hookwheel's RFC 9457 problem types.
const problemTypePrefix = "urn:hookwheel:problem:"

// problem is an error that renders as an application/problem+json response.
type problem struct {
	status int
	slug   string
	title  string
	detail string
	fields []openapi.FieldError
}

func (p *problem) Error() string { return fmt.Sprintf("%d %s: %s", p.status, p.title, p.detail) }

func newProblem(status int, slug, title, detail string) *problem {
	return &problem{status: status, slug: slug, title: title, detail: detail}
}

func notFound(what string) *problem {
	return newProblem(http.StatusNotFound, "not-found", "Not found", what+" not found")
}

// fieldErrors gathers validation failures of a request, field by field.
type fieldErrors []openapi.FieldError

func (fe *fieldErrors) add(field, format string, args ...any) {
	*fe = append(*fe, openapi.FieldError{Field: field, Message: fmt.Sprintf(format, args...)})
}

func (fe fieldErrors) problem() error {
	if len(fe) == 0 {
		return nil
	}
	names := make([]string, len(fe))
	for i, f := range fe {
		names[i] = f.Field
	}
	return &problem{
		status: http.StatusUnprocessableEntity,
		slug:   "validation",
		title:  "Invalid request",
		detail: "the request has invalid fields: " + strings.Join(names, ", "),
		fields: fe,
	}
}

// writeProblem is the server's error handler: every error leaves as
// problem+json, and only failures of hookwheel itself as 5xx.
func (s *Server) writeProblem(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	p := &problem{}
	var he *echo.HTTPError
	switch {
	case errors.As(err, &p):
	case errors.As(err, &he):
		p = problemFromHTTPError(he)
	default:
		p = newProblem(http.StatusInternalServerError, "internal", "Internal server error",
			"hookwheel failed to handle the request; it has been logged")
	}
	if p.status >= 500 {
		s.logger.Error("request failed", "method", c.Request().Method, "path", c.Request().URL.Path, "err", err)
	}
	body := openapi.Problem{
		Type:   problemTypePrefix + p.slug,
		Title:  p.title,
		Status: p.status,
		Detail: p.detail,
		Errors: p.fields,
	}
	instance := c.Request().URL.Path
	body.Instance = &instance
	c.Response().Header().Set(echo.HeaderContentType, "application/problem+json")
	c.Response().WriteHeader(p.status)
	if c.Request().Method == http.MethodHead {
		return
	}
	if err := json.NewEncoder(c.Response()).Encode(body); err != nil {
		s.logger.Debug("writing problem response", "err", err)
	}
}

func problemFromHTTPError(he *echo.HTTPError) *problem {
	detail := http.StatusText(he.Code)
	if msg, ok := he.Message.(string); ok && msg != "" {
		detail = msg
	}
	switch he.Code {
	case http.StatusNotFound:
		return newProblem(he.Code, "not-found", "Not found", "no such resource: "+detail)
	case http.StatusMethodNotAllowed:
		return newProblem(he.Code, "method-not-allowed", "Method not allowed", detail)
	case http.StatusUnauthorized:
		return newProblem(he.Code, "unauthorized", "Unauthorized", detail)
	case http.StatusForbidden:
		return newProblem(he.Code, "forbidden", "Forbidden", detail)
	case http.StatusRequestEntityTooLarge:
		return newProblem(he.Code, "too-large", "Request too large", "the request body exceeds the size limit")
	case http.StatusUnsupportedMediaType:
		return newProblem(he.Code, "unsupported-media-type", "Unsupported media type", detail)
	case http.StatusBadRequest:
		return newProblem(he.Code, "bad-request", "Bad request", detail)
	}
	if he.Code >= 500 {
		return newProblem(he.Code, "internal", http.StatusText(he.Code), detail)
	}
	return newProblem(he.Code, strings.ReplaceAll(strings.ToLower(http.StatusText(he.Code)), " ", "-"), http.StatusText(he.Code), detail)
}

// logRequests writes one structured line per request.
func logRequests(logger *slog.Logger) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			err := next(c)
			if err != nil {
				c.Error(err)
			}
			status := c.Response().Status
			level := slog.LevelDebug
			if status >= 500 {
				level = slog.LevelWarn
			}
			logger.Log(c.Request().Context(), level, "http request",
				"method", c.Request().Method, "route", c.Path(), "path", c.Request().URL.Path,
				"status", status, "bytes", c.Response().Size)
			return nil
		}
	}
}
