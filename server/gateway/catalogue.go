package gateway

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
)

// Agent is an agent the worker offers, as the gateway describes it to
// other agents and tools (MCP tools, A2A agent cards): what a caller may
// learn of it, never its model, instructions or tools. keel serve
// --config and keel dev --config fill Options.Agents from keel.yaml's
// agents (docs/ARCHITECTURE.md, "Agents on the gateway").
type Agent struct {
	// Name is the agent's name (api.ValidAgentName).
	Name string `json:"name"`
	// Description says what it does. Optional.
	Description string `json:"description,omitempty"`
	// OutputSchema is the JSON Schema of its answers. Optional.
	OutputSchema json.RawMessage `json:"output_schema,omitempty"`
}

// catalogue is the agents the gateway offers over MCP and A2A, sorted by
// name.
type catalogue struct {
	agents []Agent
	byName map[string]*Agent
}

// newCatalogue checks the agents: valid, distinct names and schemas that
// are JSON objects.
func newCatalogue(agents []Agent) (*catalogue, error) {
	c := &catalogue{agents: slices.Clone(agents), byName: map[string]*Agent{}}
	slices.SortFunc(c.agents, func(a, b Agent) int { return strings.Compare(a.Name, b.Name) })
	for i := range c.agents {
		a := &c.agents[i]
		if !api.ValidAgentName(a.Name) {
			return nil, fmt.Errorf("gateway: agent %q: a name is 1 to %d letters, digits, '-' and '_', starting with a letter", a.Name, api.MaxAgentNameBytes)
		}
		if c.byName[a.Name] != nil {
			return nil, fmt.Errorf("gateway: agent %s is named twice", a.Name)
		}
		if len(a.OutputSchema) > 0 {
			var probe map[string]json.RawMessage
			if err := json.Unmarshal(a.OutputSchema, &probe); err != nil {
				return nil, fmt.Errorf("gateway: agent %s: its output schema is not a JSON object", a.Name)
			}
		}
		c.byName[a.Name] = a
	}
	return c, nil
}

// agent returns the agent named name, or a typed not-found error: the
// same error keel gives a run of an agent the worker does not offer.
func (c *catalogue) agent(name string) (*Agent, error) {
	if a := c.byName[name]; a != nil {
		return a, nil
	}
	return nil, keel.Errorf(keel.CodeNotFound, "agent %q is not offered by this gateway", name)
}

// objectSchema reports whether a schema's root is "type": "object": only
// such a schema may be an MCP tool's output schema.
func objectSchema(s json.RawMessage) bool {
	var root struct {
		Type any `json:"type"`
	}
	if len(s) == 0 || json.Unmarshal(s, &root) != nil {
		return false
	}
	t, ok := root.Type.(string)
	return ok && t == "object"
}

// Session IDs the interop routes make: the key's prefix, then the
// protocol's mark, then 20 random hex digits.
const interopIDDigits = 20

// newSessionID names a new session of the request's key, under its
// prefix.
func newSessionID(prefix, mark string) (string, error) {
	var b [interopIDDigits / 2]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	id := prefix + mark + hex.EncodeToString(b[:])
	if err := keel.ValidateSessionID(id); err != nil {
		return "", err
	}
	return id, nil
}

// keyPrefix is the session prefix of the request's key ("" for none).
func keyPrefix(k *keyEntry) string {
	if k == nil {
		return ""
	}
	return k.prefix
}
