package devserver

import (
	"context"
	"errors"
	"fmt"
	"slices"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/temporal"
	persistencespb "go.temporal.io/server/api/persistence/v1"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/metrics"
	"go.temporal.io/server/common/persistence"
	"go.temporal.io/server/common/persistence/serialization"
	"go.temporal.io/server/common/persistence/sql"
	"go.temporal.io/server/common/primitives/timestamp"
	"go.temporal.io/server/common/resolver"
	"go.temporal.io/server/common/searchattribute/sadefs"
	sqliteschema "go.temporal.io/server/schema/sqlite"

	"github.com/keelrun/keel/api"
)

// SearchAttributes are the custom search attributes registered on the
// namespace: the keys keel's workflows upsert, so runs can be listed by
// session, state, run number and model.
var SearchAttributes = []temporal.SearchAttributeKey{
	api.AttrSessionID,
	api.AttrState,
	api.AttrRunNumber,
	api.AttrModel,
	api.AttrParent,
}

// ensureNamespace creates the namespace, or brings an existing one to the
// configured retention and search attributes, directly in the database
// before the server starts. Doing it before start (rather than through the
// API afterwards) means every service loads the final namespace when it
// starts, with no cache refresh to wait for.
func ensureNamespace(ctx context.Context, sqlCfg *config.SQL, cfg Config, logger serverLogger) error {
	factory := sql.NewFactory(*sqlCfg, resolver.NewNoopResolver(), clusterName, logger,
		metrics.NoopMetricsHandler, serialization.NewSerializer())
	defer factory.Close()
	store, err := factory.NewMetadataStore()
	if err != nil {
		return fmt.Errorf("devserver: open namespace store: %w", err)
	}
	mgr := persistence.NewMetadataManagerImpl(store, serialization.NewSerializer(), logger, clusterName)

	got, err := mgr.GetNamespace(ctx, &persistence.GetNamespaceRequest{Name: cfg.Namespace})
	var notFound *serviceerror.NamespaceNotFound
	switch {
	case errors.As(err, &notFound):
		nsCfg, err := sqliteschema.NewNamespaceConfig(clusterName, cfg.Namespace, false, nil)
		if err != nil {
			return fmt.Errorf("devserver: namespace %q: %w", cfg.Namespace, err)
		}
		if _, err := reconcileNamespace(nsCfg.Detail, cfg); err != nil {
			return err
		}
		_, err = mgr.CreateNamespace(ctx, &persistence.CreateNamespaceRequest{Namespace: nsCfg.Detail})
		if err != nil {
			return fmt.Errorf("devserver: create namespace %q: %w", cfg.Namespace, err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("devserver: read namespace %q: %w", cfg.Namespace, err)
	}

	changed, err := reconcileNamespace(got.Namespace, cfg)
	if err != nil || !changed {
		return err
	}
	meta, err := mgr.GetMetadata(ctx)
	if err != nil {
		return fmt.Errorf("devserver: read namespace metadata: %w", err)
	}
	got.Namespace.ConfigVersion++ // as the frontend does on every config change
	err = mgr.UpdateNamespace(ctx, &persistence.UpdateNamespaceRequest{
		Namespace:           got.Namespace,
		IsGlobalNamespace:   got.IsGlobalNamespace,
		NotificationVersion: meta.NotificationVersion,
	})
	if err != nil {
		return fmt.Errorf("devserver: update namespace %q: %w", cfg.Namespace, err)
	}
	return nil
}

// reconcileNamespace sets the retention and maps every missing search
// attribute to a free preallocated column of its type. It reports whether it
// changed anything.
func reconcileNamespace(ns *persistencespb.NamespaceDetail, cfg Config) (bool, error) {
	changed := false
	if ns.Config == nil {
		ns.Config = &persistencespb.NamespaceConfig{}
	}
	if ns.Config.GetRetention().AsDuration() != cfg.Retention {
		ns.Config.Retention = timestamp.DurationPtr(cfg.Retention)
		changed = true
	}
	aliases := ns.Config.CustomSearchAttributeAliases
	if aliases == nil {
		aliases = map[string]string{}
	}
	columns := sadefs.GetDBIndexSearchAttributes(nil).CustomSearchAttributes
	for _, key := range SearchAttributes {
		if field, ok := fieldOf(aliases, key.GetName()); ok {
			if columns[field] != key.GetValueType() {
				return false, fmt.Errorf("devserver: search attribute %s is registered as %v, keel needs %v",
					key.GetName(), columns[field], key.GetValueType())
			}
			continue
		}
		field, err := freeColumn(columns, aliases, key.GetValueType())
		if err != nil {
			return false, fmt.Errorf("devserver: search attribute %s: %w", key.GetName(), err)
		}
		aliases[field] = key.GetName()
		changed = true
	}
	ns.Config.CustomSearchAttributeAliases = aliases
	return changed, nil
}

func fieldOf(aliases map[string]string, name string) (string, bool) {
	for field, alias := range aliases {
		if alias == name {
			return field, true
		}
	}
	return "", false
}

// freeColumn picks the lowest-numbered unused column of a type, so the
// mapping is the same on every machine.
func freeColumn(columns map[string]enumspb.IndexedValueType, aliases map[string]string, t enumspb.IndexedValueType) (string, error) {
	var candidates []string
	for field, ft := range columns {
		if ft == t && sadefs.IsPreallocatedCSAFieldName(field, t) {
			candidates = append(candidates, field)
		}
	}
	slices.Sort(candidates)
	for _, field := range candidates {
		if _, used := aliases[field]; !used {
			return field, nil
		}
	}
	return "", fmt.Errorf("all %d columns of type %v are in use", len(candidates), t)
}
