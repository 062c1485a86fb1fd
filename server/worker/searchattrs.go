package worker

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/keelrun/keel/api"
)

// SearchAttributes lists the custom search attributes keel's workflows set.
func SearchAttributes() map[string]enumspb.IndexedValueType {
	return map[string]enumspb.IndexedValueType{
		api.AttrSessionID.GetName(): enumspb.INDEXED_VALUE_TYPE_KEYWORD,
		api.AttrState.GetName():     enumspb.INDEXED_VALUE_TYPE_KEYWORD,
		api.AttrRunNumber.GetName(): enumspb.INDEXED_VALUE_TYPE_INT,
		api.AttrModel.GetName():     enumspb.INDEXED_VALUE_TYPE_KEYWORD,
		api.AttrParent.GetName():    enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	}
}

// SearchAttributesTimeout bounds how long EnsureSearchAttributes keeps
// trying. It covers the server's namespace cache (refreshed every 10 s by
// default), which answers ListSearchAttributes and which a namespace just
// created or changed has not reached yet.
const SearchAttributesTimeout = time.Minute

// ErrSearchAttributeType reports a search attribute of keel's registered
// with another type: keel's workflows cannot set it, and only an operator
// can resolve it (remove it, or use another namespace).
var ErrSearchAttributeType = errors.New("worker: search attribute registered with another type")

// EnsureSearchAttributes registers keel's search attributes on the
// namespace if they are missing. Workers call it at start, so keel runs on
// any Temporal cluster without a manual setup step.
//
// Several workers may start together on a fresh namespace. Their requests
// race: on SQL visibility each picks a free column from a possibly stale
// view of the namespace, and the server refuses a loser ("field name
// already allocated", or a conflicting namespace update). So a refused or failed
// registration is retried, with jittered backoff, from a fresh list, until
// every attribute is there with its type, for up to
// SearchAttributesTimeout; a namespace that does not exist yet (created by
// a setup job starting at the same time) is waited for the same way. An
// attribute registered with another type fails at once
// (ErrSearchAttributeType).
func EnsureSearchAttributes(ctx context.Context, c client.Client, namespace string) error {
	ctx, cancel := context.WithTimeout(ctx, SearchAttributesTimeout)
	defer cancel()
	delay := 100 * time.Millisecond
	for {
		err := addMissingSearchAttributes(ctx, c, namespace)
		if err == nil || errors.Is(err, ErrSearchAttributeType) {
			return err
		}
		// Half to all of delay: two workers refused together do not retry
		// together.
		wait := delay/2 + rand.N(delay/2+1)
		select {
		case <-ctx.Done():
			return fmt.Errorf("worker: search attributes on namespace %q not registered after %v: %w", namespace, SearchAttributesTimeout, err)
		case <-time.After(wait):
		}
		delay = min(2*delay, 2*time.Second)
	}
}

// addMissingSearchAttributes lists the namespace's attributes and adds
// those of keel's that are missing; nil means all were there.
func addMissingSearchAttributes(ctx context.Context, c client.Client, namespace string) error {
	list, err := c.OperatorService().ListSearchAttributes(ctx,
		&operatorservice.ListSearchAttributesRequest{Namespace: namespace})
	if err != nil {
		return fmt.Errorf("list search attributes: %w", err)
	}
	missing := map[string]enumspb.IndexedValueType{}
	for name, want := range SearchAttributes() {
		got, ok := list.GetCustomAttributes()[name]
		switch {
		case !ok:
			missing[name] = want
		case got != want:
			return fmt.Errorf("%w: %s is %v on namespace %q, keel needs %v", ErrSearchAttributeType, name, got, namespace, want)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	_, err = c.OperatorService().AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{
		Namespace: namespace, SearchAttributes: missing,
	})
	// The server skips a name that another worker registered meanwhile,
	// so success means every one is there.
	var exists *serviceerror.AlreadyExists
	if err != nil && !errors.As(err, &exists) {
		return fmt.Errorf("add search attributes: %w", err)
	}
	return nil
}
