// Package live carries ephemeral events (text and reasoning deltas, tool
// progress) from the activities that produce them to subscribers, in
// process (Memory) or across processes and machines (NATS). It never slows
// a run: publishing does not wait for subscribers or the network, and a
// subscriber that falls behind gets an explicit *LaggedError with the exact
// number of events it missed, then continues with the oldest event it kept.
//
// Live events are provisional. Durable events are read from the session's
// log (the client SDK's EventsFrom); each ephemeral envelope carries
// AfterSeq, the last durable sequence before it, so a reader merges the
// two, and after a *LaggedError resumes durable events from the last
// sequence it saw.
//
// No subscriber receives an envelope that fails Check (another session's,
// a type that is not ephemeral, one with a sequence number); NATS encrypts
// what it carries with NATSOptions.Encryption; and both channels carry
// the workers' cancel notices (CancelNotice) beside the events.
//
//	ch := live.NewMemory() // or live.DialNATS("nats://127.0.0.1:4222", live.NATSOptions{})
//	defer ch.Close()
//
//	sub, err := ch.Subscribe(ctx, "s1", live.SubscribeOptions{})
//	if err != nil {
//		return err
//	}
//	defer sub.Close()
//	for {
//		env, err := sub.Next(ctx)
//		var lagged *live.LaggedError
//		switch {
//		case errors.As(err, &lagged):
//			// Missed lagged.Missed events: re-read durable events.
//			continue
//		case err != nil:
//			return err // ErrClosed or ctx's error
//		}
//		render(env)
//	}
//
// See docs/live.md for the delivery guarantees and benchmark figures.
package live
