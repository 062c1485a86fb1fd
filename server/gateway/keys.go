package gateway

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"

	"github.com/keelrun/keel"
)

// EnvAPIKeys names the environment variable that holds API keys, separated
// by commas or newlines; each may carry options as in a key file.
const EnvAPIKeys = "KEEL_API_KEYS"

// Scope is what an API key may do.
type Scope string

// Scopes of an API key.
const (
	// ScopeFull keys may call every route (the default).
	ScopeFull Scope = "full"
	// ScopeRead keys may only read: GET (a session's state, history,
	// events and requests, the session list). Anything else is 403
	// forbidden.
	ScopeRead Scope = "read"
)

// APIKey is a bearer token and what it may do.
type APIKey struct {
	Key string
	// Scope is what the key may do; "" is ScopeFull.
	Scope Scope
	// Prefix, when set, limits the key to the sessions whose IDs start
	// with it: other sessions answer 404 not_found, whether they exist or
	// not, and the session list shows only its own. Routes that name no
	// session and do not check one themselves are 403 forbidden to it.
	Prefix string
}

// FullKeys turns plain keys into APIKeys of full scope.
func FullKeys(keys ...string) []APIKey {
	out := make([]APIKey, len(keys))
	for i, k := range keys {
		out[i] = APIKey{Key: k}
	}
	return out
}

// LoadAPIKeys reads API keys: one a line from file when file is not empty
// (blank lines and lines starting with # are skipped), then those in the
// environment variable EnvAPIKeys, separated by commas or newlines. A key
// may be followed, after spaces, by options:
//
//	KEY                                  full access
//	KEY scope=read                       GET routes only
//	KEY prefix=team-a-                   sessions whose IDs start with team-a-
//	KEY scope=read prefix=team-a-        both
//
// Errors name the file and line, never a key or an option's value.
func LoadAPIKeys(file string) ([]APIKey, error) {
	var keys []APIKey
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("gateway: read API key file: %w", err)
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		for line := 1; sc.Scan(); line++ {
			text := strings.TrimSpace(sc.Text())
			if text == "" || strings.HasPrefix(text, "#") {
				continue
			}
			k, err := ParseAPIKey(text)
			if err != nil {
				return nil, fmt.Errorf("gateway: API key file %s, line %d: %w", file, line, err)
			}
			keys = append(keys, k)
		}
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("gateway: read API key file: %w", err)
		}
		if len(keys) == 0 {
			return nil, fmt.Errorf("gateway: API key file %s holds no key", file)
		}
	}
	entry := 0
	for _, text := range strings.FieldsFunc(os.Getenv(EnvAPIKeys), func(r rune) bool { return r == ',' || r == '\n' }) {
		if text = strings.TrimSpace(text); text == "" {
			continue
		}
		entry++
		k, err := ParseAPIKey(text)
		if err != nil {
			return nil, fmt.Errorf("gateway: %s, key %d: %w", EnvAPIKeys, entry, err)
		}
		keys = append(keys, k)
	}
	if err := checkDuplicates(keys); err != nil {
		return nil, err
	}
	return keys, nil
}

// ParseAPIKey reads one key with its options ("KEY scope=read
// prefix=team-a-"). Errors never quote the key, an option's value, or a
// word that is not an option (it could be a second key on the line).
func ParseAPIKey(text string) (APIKey, error) {
	words := strings.Fields(text)
	if len(words) == 0 {
		return APIKey{}, errors.New("no key")
	}
	k := APIKey{Key: words[0]}
	seen := map[string]bool{}
	for i, w := range words[1:] {
		name, value, ok := strings.Cut(w, "=")
		if !ok || (name != "scope" && name != "prefix") {
			return APIKey{}, fmt.Errorf("word %d after the key is not an option (scope=read|full or prefix=PREFIX)", i+1)
		}
		if seen[name] {
			return APIKey{}, fmt.Errorf("option %s is given twice", name)
		}
		seen[name] = true
		if value == "" {
			// An empty prefix would mean every session: say so rather
			// than widen the key.
			return APIKey{}, fmt.Errorf("option %s has no value", name)
		}
		switch name {
		case "scope":
			k.Scope = Scope(value)
		case "prefix":
			k.Prefix = value
		}
	}
	if err := k.check(); err != nil {
		return APIKey{}, err
	}
	return k, nil
}

// minKeyLength keeps guessable keys out.
const minKeyLength = 16

// check validates a key and its options without quoting either.
func (k APIKey) check() error {
	if len(k.Key) < minKeyLength {
		return fmt.Errorf("an API key must have at least %d characters (this one has %d)", minKeyLength, len(k.Key))
	}
	for _, r := range k.Key {
		if r <= ' ' || r == 0x7f {
			return errors.New("an API key may not hold spaces or control characters")
		}
	}
	switch k.Scope {
	case "", ScopeFull, ScopeRead:
	default:
		return fmt.Errorf("scope must be %s or %s", ScopeRead, ScopeFull)
	}
	if k.Prefix != "" {
		// A prefix is the start of a session ID: the same characters.
		if err := keel.ValidateSessionID(k.Prefix); err != nil {
			return fmt.Errorf("prefix must be 1 to %d letters, digits, '-' or '_'", keel.MaxIDLength)
		}
	}
	return nil
}

// checkDuplicates refuses a key given twice: its two entries could give it
// different rights.
func checkDuplicates(keys []APIKey) error {
	seen := map[[sha256.Size]byte]int{}
	for i, k := range keys {
		sum := sha256.Sum256([]byte(k.Key))
		if j, ok := seen[sum]; ok {
			return fmt.Errorf("gateway: API keys %d and %d (in the order loaded) are the same key", j+1, i+1)
		}
		seen[sum] = i
	}
	return nil
}

// keyring checks bearer tokens. It holds the keys' hashes, so comparing
// takes the same time whatever the key's length, and no key is kept in
// the clear.
type keyring struct{ keys []*keyEntry }

// keyEntry is one key's hash and rights; id numbers it for the streams
// counted per key.
type keyEntry struct {
	id     int
	sum    [sha256.Size]byte
	scope  Scope
	prefix string
}

func newKeyring(plain []string, keys []APIKey) (*keyring, error) {
	all := append(FullKeys(plain...), keys...)
	if err := checkDuplicates(all); err != nil {
		return nil, err
	}
	kr := &keyring{}
	for i, k := range all {
		if err := k.check(); err != nil {
			return nil, fmt.Errorf("gateway: API key %d: %w", i+1, err)
		}
		scope := k.Scope
		if scope == "" {
			scope = ScopeFull
		}
		kr.keys = append(kr.keys, &keyEntry{id: i, sum: sha256.Sum256([]byte(k.Key)), scope: scope, prefix: k.Prefix})
	}
	return kr, nil
}

func (kr *keyring) enabled() bool { return len(kr.keys) > 0 }

// match returns the key r carries, nil when it carries none of them. Every
// key's hash is compared, in constant time.
func (kr *keyring) match(r *http.Request) *keyEntry {
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || token == "" {
		return nil
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(token)))
	var found *keyEntry
	for _, k := range kr.keys {
		if subtle.ConstantTimeCompare(k.sum[:], sum[:]) == 1 {
			found = k
		}
	}
	return found
}

// keyCtx carries the request's key from guard to the handlers.
type keyCtx struct{}

// requestKey is the key the request was let in with; nil without keys or
// on a public route.
func requestKey(r *http.Request) *keyEntry {
	k, _ := r.Context().Value(keyCtx{}).(*keyEntry)
	return k
}

// readOnlyMethod reports whether a method only reads.
func readOnlyMethod(m string) bool { return m == http.MethodGet || m == http.MethodHead }

// authorize checks what the key may do on the route: its scope against
// the method, its prefix against the session the path names (or, for a
// route without one, whether the route checks sessions itself).
func (k *keyEntry) authorize(rt Route, r *http.Request) *Error {
	if k.scope == ScopeRead && !readOnlyMethod(r.Method) {
		return apiError(http.StatusForbidden, CodeForbidden, "this API key may only read (scope=read); "+r.Method+" is refused")
	}
	if k.prefix == "" {
		return nil
	}
	if id := r.PathValue("id"); id != "" {
		if !strings.HasPrefix(id, k.prefix) {
			return sessionNotFound(id)
		}
		return nil
	}
	if !rt.sessions && !rt.noSession {
		return apiError(http.StatusForbidden, CodeForbidden, "this API key is limited to a session prefix, and this route names no session")
	}
	return nil
}

// allowsSession reports whether the request's key covers session id (any
// key without a prefix does, and so does no key).
func allowsSession(r *http.Request, id string) bool {
	k := requestKey(r)
	return k == nil || strings.HasPrefix(id, k.prefix)
}

// sessionNotFound answers for a session a key's prefix does not cover:
// the same whether the session exists or not.
func sessionNotFound(id string) *Error {
	return fromError(keel.Errorf(keel.CodeNotFound, "session %s not found", id))
}

// withKey stores the request's key in its context.
func withKey(r *http.Request, k *keyEntry) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), keyCtx{}, k))
}
