// Package ratelimit holds the RateLimit workflow's names and types
// (docs/contract.md §20.5): keel's workers ask it, and nothing else does,
// so none of it is part of the public contract in package api. A
// worker's limits are configured in keel.yaml (limits.rate), whose
// values are RateLimit.
package ratelimit

import (
	"time"
	"unicode/utf8"

	"github.com/keelrun/keel"
)

// A RateLimit workflow paces the model requests of one limit (keel.yaml's
// limits.rate: a provider, "provider:model" or a model spec) for every
// worker of the namespace (docs/contract.md §20.5). Its ID is
// RateLimitWorkflowID(key); a worker asks it with the UpdateRate update,
// sent with update-with-start so the first asker creates it. It holds the
// limit's pace in workflow state, answers how long each request waits,
// and continues as new after RateUpdatesPerRun updates, carrying its
// state.
const (
	RateLimitWorkflowName = "RateLimit"
	// RateLimitWorkflowIDPrefix starts every RateLimit workflow's ID.
	RateLimitWorkflowIDPrefix = "keel-rate/"
	// UpdateRate reserves requests and gives reservations back
	// (RateRequest, answered by a RateGrant).
	UpdateRate = "rate"
)

// Bounds of what a RateLimit workflow takes (docs/contract.md §20.5).
// Its update's validator refuses a request past any of them with
// keel.InvalidInput, before it enters history.
const (
	// MaxRateKeyBytes bounds a limit's name.
	MaxRateKeyBytes = 200
	// MaxRateBatch bounds the reservations, and the give-backs, of one
	// update.
	MaxRateBatch = 512
	// MaxRateIDBytes bounds a reservation's ID.
	MaxRateIDBytes = 64
	// MaxRateTokens bounds the tokens of one reservation, and what a
	// give-back says a request used.
	MaxRateTokens = 10_000_000
	// MaxRequestsPerMinute and MaxTokensPerMinute bound a limit.
	MaxRequestsPerMinute = 1_000_000
	MaxTokensPerMinute   = 1_000_000_000
	// MaxRateHeld bounds the reservations a limit remembers, so that they
	// can be given back. A reservation made while it is full is not
	// remembered: it stands as reserved, and giving it back changes
	// nothing (the limit errs towards fewer requests, never more).
	MaxRateHeld = 2048
	// RateHoldFor is how long after its time a reservation with tokens
	// can be settled to what its request used; one without tokens can be
	// given back until RateGrace after its time.
	RateHoldFor = 15 * time.Minute
	RateGrace   = time.Minute
	// RateUpdatesPerRun is how many updates a RateLimit execution takes
	// before it continues as new (Temporal takes at most 2,000 a run).
	RateUpdatesPerRun = 1000
)

// RateLimit bounds the requests and tokens per minute of one limit. Zero
// fields do not limit. Requests burst a second's worth (at least one):
// that many are sent at once on an idle limit, the rest at the pace.
// Tokens burst a minute's worth, as providers count them.
type RateLimit struct {
	RequestsPerMinute int `json:"requests_per_minute,omitempty"`
	TokensPerMinute   int `json:"tokens_per_minute,omitempty"`
}

// Limits reports whether l limits anything.
func (l RateLimit) Limits() bool { return l.RequestsPerMinute > 0 || l.TokensPerMinute > 0 }

// Validate checks l against MaxRequestsPerMinute and MaxTokensPerMinute.
func (l RateLimit) Validate() error {
	switch {
	case l.RequestsPerMinute < 0 || l.TokensPerMinute < 0:
		return keel.Errorf(keel.CodeInvalidInput, "rate limit: a rate cannot be negative")
	case l.RequestsPerMinute > MaxRequestsPerMinute:
		return keel.Errorf(keel.CodeInvalidInput, "rate limit: requests_per_minute is above %d", MaxRequestsPerMinute)
	case l.TokensPerMinute > MaxTokensPerMinute:
		return keel.Errorf(keel.CodeInvalidInput, "rate limit: tokens_per_minute is above %d", MaxTokensPerMinute)
	}
	return nil
}

// RateLimitWorkflowID is the ID of the RateLimit workflow of the limit
// named key.
func RateLimitWorkflowID(key string) string { return RateLimitWorkflowIDPrefix + key }

// ValidateRateKey checks a limit's name: not empty, valid UTF-8, at most
// MaxRateKeyBytes, no control characters.
func ValidateRateKey(key string) error {
	if key == "" || len(key) > MaxRateKeyBytes || !utf8.ValidString(key) {
		return keel.Errorf(keel.CodeInvalidInput, "rate limit: a name is 1 to %d bytes of UTF-8", MaxRateKeyBytes)
	}
	for _, r := range key {
		if r < 0x20 || r == 0x7f {
			return keel.Errorf(keel.CodeInvalidInput, "rate limit: a name holds no control characters")
		}
	}
	return nil
}

// RateLimitInput starts a RateLimit execution: the limit's name, and the
// state its previous execution carried (zero for the first).
type RateLimitInput struct {
	Key   string         `json:"key"`
	State RateLimitState `json:"state"`
}

// RateLimitState is a limit's pace: for requests and for tokens, the time
// at which everything reserved so far has come back (a generic cell rate
// algorithm's theoretical arrival time), and the reservations it can
// still take back, by ID.
type RateLimitState struct {
	Requests time.Time           `json:"requests,omitzero"`
	Tokens   time.Time           `json:"tokens,omitzero"`
	Held     map[string]RateHeld `json:"held,omitempty"`
}

// RateHeld is a reservation a limit remembers: when its request may be
// sent (At), until when it can be given back (Until), and what it took.
type RateHeld struct {
	At    time.Time `json:"at"`
	Until time.Time `json:"until"`
	// Request is the pace time its request took; zero when the limit
	// counted no requests.
	Request time.Duration `json:"request,omitempty"`
	// Tokens and TokensPerMinute are the tokens it took and the token
	// rate it took them at; zero when the limit counted no tokens.
	Tokens          int64 `json:"tokens,omitempty"`
	TokensPerMinute int   `json:"tokens_per_minute,omitempty"`
}

// RateRequest is the UpdateRate update's argument: reservations to make
// under Limit (the asking worker's limit; each request is paced by the
// limit its worker sets) and reservations to give back.
type RateRequest struct {
	Limit    RateLimit         `json:"limit"`
	Reserve  []RateReservation `json:"reserve,omitempty"`
	GiveBack []RateGiveBack    `json:"give_back,omitempty"`
}

// RateReservation asks for one request and Tokens tokens. Its ID is the
// asker's, unique among the limit's reservations: a reservation whose ID
// the limit already holds is answered again, never taken twice.
type RateReservation struct {
	ID     string `json:"id"`
	Tokens int64  `json:"tokens,omitempty"`
}

// RateGiveBack returns a reservation: all of it when its request was not
// sent (cancelled while it waited), the tokens beyond Used when it was
// (a reply smaller than its estimate; a larger one takes the difference).
// A give-back of a reservation the limit does not hold changes nothing.
type RateGiveBack struct {
	ID   string `json:"id"`
	Sent bool   `json:"sent,omitempty"`
	Used int64  `json:"used,omitempty"`
}

// RateGrant answers a RateRequest: how long each reservation waits, in
// the order asked, from the moment the limit answered.
type RateGrant struct {
	Waits []keel.Duration `json:"waits"`
}

// RateLimitStatus is the answer of a RateLimit workflow's state query.
type RateLimitStatus struct {
	Key      string    `json:"key"`
	Requests time.Time `json:"requests,omitzero"`
	Tokens   time.Time `json:"tokens,omitzero"`
	// Held is how many reservations it remembers; Updates how many
	// updates this execution took.
	Held    int `json:"held"`
	Updates int `json:"updates"`
}

// Validate checks r against the bounds above: a limit within them, and
// limiting something when r reserves; at most MaxRateBatch reservations
// and give-backs; IDs of 1 to MaxRateIDBytes bytes, each reserved once;
// tokens from 0 to MaxRateTokens.
func (r RateRequest) Validate() error {
	if err := r.Limit.Validate(); err != nil {
		return err
	}
	if len(r.Reserve) > 0 && !r.Limit.Limits() {
		return keel.Errorf(keel.CodeInvalidInput, "rate limit: a reservation under a limit of nothing")
	}
	if len(r.Reserve) > MaxRateBatch || len(r.GiveBack) > MaxRateBatch {
		return keel.Errorf(keel.CodeInvalidInput, "rate limit: at most %d reservations and %d give-backs an update", MaxRateBatch, MaxRateBatch)
	}
	seen := make(map[string]bool, len(r.Reserve))
	for _, res := range r.Reserve {
		if err := validRateID(res.ID); err != nil {
			return err
		}
		if seen[res.ID] {
			return keel.Errorf(keel.CodeInvalidInput, "rate limit: a reservation ID appears twice")
		}
		seen[res.ID] = true
		if res.Tokens < 0 || res.Tokens > MaxRateTokens {
			return keel.Errorf(keel.CodeInvalidInput, "rate limit: a reservation's tokens are 0 to %d", MaxRateTokens)
		}
	}
	for _, g := range r.GiveBack {
		if err := validRateID(g.ID); err != nil {
			return err
		}
		if g.Used < 0 || g.Used > MaxRateTokens {
			return keel.Errorf(keel.CodeInvalidInput, "rate limit: used tokens are 0 to %d", MaxRateTokens)
		}
	}
	return nil
}

func validRateID(id string) error {
	if id == "" || len(id) > MaxRateIDBytes {
		return keel.Errorf(keel.CodeInvalidInput, "rate limit: a reservation ID is 1 to %d bytes", MaxRateIDBytes)
	}
	return nil
}
