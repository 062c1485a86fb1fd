package client

import (
	"errors"
	"strings"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/temporal"

	"github.com/keelrun/keel"
)

// fromTemporal maps what Temporal returned to keel's typed errors: a
// workflow's rejection carries its keel code as the ApplicationError type;
// a missing workflow is keel.ErrNotFound.
func fromTemporal(err error, what string) error {
	if err == nil {
		return nil
	}
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) && strings.HasPrefix(appErr.Type(), "keel.") {
		ke := &keel.Error{}
		if appErr.HasDetails() && appErr.Details(ke) == nil && ke.Code != "" {
			return ke
		}
		return &keel.Error{Code: keel.Code(appErr.Type()), Message: appErr.Message()}
	}
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return &keel.Error{Code: keel.CodeNotFound, Message: what + " not found"}
	}
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	if errors.As(err, &started) {
		return &keel.Error{Code: keel.CodeNotAccepting, Message: what + " is closed and cannot take new prompts"}
	}
	return err
}

// isClosedErr reports whether Temporal refused an update because the
// workflow already closed.
func isClosedErr(err error) bool {
	var nf *serviceerror.NotFound
	var fp *serviceerror.FailedPrecondition
	return errors.As(err, &nf) || errors.As(err, &fp)
}
