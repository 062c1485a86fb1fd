package api

import (
	"encoding/json"
	"strings"
	"unicode/utf8"

	"github.com/keelrun/keel"
)

// ValidateScheduleID checks that id can name a schedule: 1 to
// MaxScheduleIDLength letters, digits, '-' and '_' (a session ID's
// characters, so a firing's session ID built from it is one). The error
// never repeats the ID.
func ValidateScheduleID(id string) error {
	if id == "" || len(id) > MaxScheduleIDLength {
		return keel.Errorf(keel.CodeInvalidInput, "schedule ID must be 1 to %d characters, got %d", MaxScheduleIDLength, len(id))
	}
	if i := strings.IndexFunc(id, notIDRune); i >= 0 {
		return keel.Errorf(keel.CodeInvalidInput, "schedule ID has a character other than letters, digits, '-' and '_' at byte %d", i)
	}
	return nil
}

func notIDRune(r rune) bool {
	return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_')
}

// Validate checks a schedule as a client wrote it, against lim (zero
// fields take the defaults of Limits): its ID, when it fires, its prompt,
// its session, its config's shape and size, and its policies. What the
// worker offers (models, tools, budgets within its ceilings) is the
// worker's check (docs/contract.md §22.2). Errors never repeat a value.
func (s Schedule) Validate(lim Limits) error {
	lim = lim.WithDefaults()
	if err := ValidateScheduleID(s.ID); err != nil {
		return err
	}
	if err := s.ScheduleSpec.validate(); err != nil {
		return err
	}
	switch {
	case strings.TrimSpace(s.Prompt) == "":
		return keel.Errorf(keel.CodeInvalidInput, "a schedule's prompt must be 1 to %d bytes of text", lim.PromptBytes)
	case len(s.Prompt) > lim.PromptBytes:
		return keel.Errorf(keel.CodeTooLarge, "the prompt is %d bytes; the limit is %d", len(s.Prompt), lim.PromptBytes)
	case !utf8.ValidString(s.Prompt):
		return keel.Errorf(keel.CodeInvalidInput, "the prompt is not UTF-8 text")
	}
	if s.Session != "" {
		if err := keel.ValidateSessionID(s.Session); err != nil {
			return keel.Errorf(keel.CodeInvalidInput, "session: must be 1 to %d letters, digits, '-' and '_'", keel.MaxIDLength)
		}
		if s.NewSession {
			return keel.Errorf(keel.CodeInvalidInput, "a schedule sends to one session or to a new one each time: not both")
		}
	}
	if IsChildSessionID(s.Target()) {
		return keel.Errorf(keel.CodeInvalidInput, "session: %s is a child session's ID, which takes no prompts", s.Target())
	}
	switch s.Overlap {
	case "", OverlapSkip, OverlapQueue, OverlapSteer:
	default:
		return keel.Errorf(keel.CodeInvalidInput, "overlap: use skip, queue or steer")
	}
	if s.NewSession && s.Overlap != "" {
		return keel.Errorf(keel.CodeInvalidInput, "overlap applies to a schedule's one session: a new session has no active run")
	}
	if s.CatchupWindow != 0 && (s.CatchupWindow < MinCatchupWindow || s.CatchupWindow > MaxCatchupWindow) {
		return keel.Errorf(keel.CodeInvalidInput, "catchup_window must be from %s to %s", MinCatchupWindow, MaxCatchupWindow)
	}
	return s.validateConfig(lim)
}

// validate checks when a schedule fires. Temporal checks the cron
// expression's fields and the time zone's name.
func (sp ScheduleSpec) validate() error {
	switch {
	case sp.Cron == "" && sp.Every == 0:
		return keel.Errorf(keel.CodeInvalidInput, "a schedule needs cron, every, or both")
	case len(sp.Cron) > MaxCronBytes:
		return keel.Errorf(keel.CodeTooLarge, "cron is %d bytes; the limit is %d", len(sp.Cron), MaxCronBytes)
	case strings.IndexFunc(sp.Cron, notCronRune) >= 0:
		return keel.Errorf(keel.CodeInvalidInput, "cron may hold printable ASCII only")
	case strings.Contains(sp.Cron, "TZ="):
		// Temporal would take a time zone from the expression; keel
		// keeps it in one place.
		return keel.Errorf(keel.CodeInvalidInput, "cron: give the time zone as timezone, not TZ=")
	case sp.Every != 0 && sp.Every < MinScheduleEvery:
		return keel.Errorf(keel.CodeInvalidInput, "every must be at least %s", MinScheduleEvery)
	case sp.Jitter < 0 || sp.Jitter > MaxScheduleJitter:
		return keel.Errorf(keel.CodeInvalidInput, "jitter must be from 0 to %s", MaxScheduleJitter)
	case len(sp.Timezone) > MaxTimezoneBytes:
		return keel.Errorf(keel.CodeInvalidInput, "timezone is %d bytes; the limit is %d", len(sp.Timezone), MaxTimezoneBytes)
	case strings.IndexFunc(sp.Timezone, notZoneRune) >= 0 || strings.Contains(sp.Timezone, ".."):
		return keel.Errorf(keel.CodeInvalidInput, "timezone must be an IANA name such as Europe/Berlin")
	}
	return nil
}

func notCronRune(r rune) bool { return r < ' ' || r > '~' }

func notZoneRune(r rune) bool {
	return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("/_+-", r))
}

// validateConfig checks the config's shape and size: the names it holds
// are names, never paths, URLs or commands (the worker decides whether it
// offers them).
func (s Schedule) validateConfig(lim Limits) error {
	if s.Config == nil {
		return nil
	}
	cfg := *s.Config
	if err := cfg.Validate(); err != nil {
		return err
	}
	if len(cfg.Model) > MaxModelSpecBytes || strings.IndexFunc(cfg.Model, notNameRune) >= 0 {
		return keel.Errorf(keel.CodeInvalidInput, "model: not a model spec the worker could offer")
	}
	if len(cfg.Tools) > MaxScheduleTools {
		return keel.Errorf(keel.CodeInvalidInput, "tools: at most %d names", MaxScheduleTools)
	}
	for i, t := range cfg.Tools {
		if t == "" || len(t) > MaxToolNameBytes || strings.IndexFunc(t, notNameRune) >= 0 || strings.ContainsAny(t, `/\`) {
			return keel.Errorf(keel.CodeInvalidInput, "tools: name %d is not a tool name", i+1)
		}
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		return keel.Errorf(keel.CodeInvalidInput, "config: %v", err)
	}
	if len(b) > lim.ConfigBytes {
		return keel.Errorf(keel.CodeTooLarge, "the run config (as JSON) is %d bytes; the limit is %d", len(b), lim.ConfigBytes)
	}
	return nil
}

// notNameRune refuses in a model or tool name what no name the worker
// offers holds: spaces and control characters. (A model name may hold a
// '/', as many servers' do; the worker refuses what it does not offer.)
func notNameRune(r rune) bool { return r <= ' ' || r == 0x7f }
