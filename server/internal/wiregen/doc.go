// Package wiregen generates the gateway's wire types for everyone who
// reads them from one source, the Go types the gateway encodes
// (gateway.RunRequest, api.SessionStatus, keel.Envelope, ...; Roots
// lists them):
//
//   - components.schemas of server/gateway/openapi.json (its paths,
//     parameters and responses stay written by hand and refer to the
//     schemas by $ref);
//   - the interfaces between the GENERATED markers of
//     clients/typescript/index.d.ts;
//   - the TypedDicts between the GENERATED markers of
//     clients/python/keel_client/types.py.
//
// The clients' types are made from the annotated schemas, not from Go
// again, so the three say the same thing. What Go's types cannot say
// (descriptions, bounds, patterns, defaults, the shape of a
// json.RawMessage) is annotations.json, a JSON Merge Patch over the
// schemas the types make; an annotation naming a schema or field the
// types lack is an error.
//
// Run it with `cd server && go generate ./gateway`;
// TestGeneratedFilesFresh fails when a generated file is stale.
//
// It is a small program over reflect rather than a JSON Schema library
// such as github.com/invopop/jsonschema (which the server module already
// uses for tool schemas): that library writes draft 2020-12 $defs named
// after Go types, where the document needs OpenAPI components under its
// own names, some types spelled inline and others left as plain objects,
// and the same model must also print TypeScript and Python. Walking
// encoding/json's rules (tags, omitempty for optional, embedded structs)
// is the smaller part of the work, and keeping it here keeps the
// output's shape under the project's control.
package wiregen
