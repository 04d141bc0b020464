// Package webhook delivers the watcher's notifications (a run's GPUs
// idle, a run stalled, and their end) to a URL as plain HTTP POSTs with a
// JSON body: a queue bounded in size, a few retries with backoff, and a
// timeout per attempt, so that a slow or dead receiver costs the server
// nothing but the notifications it drops. docs/run.md describes the body.
package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/sextant/sextant/internal/runevents"
	"github.com/sextant/sextant/internal/wire"
)

// Options configure a Sender.
type Options struct {
	// URL receives the POSTs; required, http or https.
	URL string
	// RunURL, when set, makes the run's page address from its experiment
	// and run ids ("https://sextant.example.com/#/experiments/%s/runs/%s"
	// style: two %s); empty leaves it out.
	RunURL string
	// Queue bounds the notifications waiting; 0 means 1000. Beyond it new
	// ones are dropped (and logged).
	Queue int
	// Attempts is how often one notification is tried; 0 means 5.
	Attempts int
	// Backoff is the wait after the first failed attempt, doubling after
	// each, up to 30 s; 0 means 1 s.
	Backoff time.Duration
	// Timeout bounds one attempt; 0 means 10 s.
	Timeout time.Duration
	// HTTPClient sends the requests; nil means a default one.
	HTTPClient *http.Client
	// Logger receives what was dropped; nil discards.
	Logger *slog.Logger
}

// Sender implements runevents.Notifier.
type Sender struct {
	opts   Options
	hc     *http.Client
	log    *slog.Logger
	queue  chan runevents.Notification
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

var _ runevents.Notifier = (*Sender)(nil)

// Body is the JSON a webhook receives. text is a line for people (Slack's
// and Mattermost's incoming webhooks show it as it is).
type Body struct {
	Text  string         `json:"text"`
	State string         `json:"state"` // "open" or "closed"
	Event wire.EventJSON `json:"event"`
	Run   BodyRun        `json:"run"`
}

// BodyRun names the run of a notification.
type BodyRun struct {
	RunID        string `json:"run_id"`
	RunName      string `json:"run_name"`
	ExperimentID string `json:"experiment_id"`
	URL          string `json:"url,omitempty"`
}

// Redact returns what may be logged of a webhook URL: its scheme and host.
// The path and query of a Slack or Teams incoming webhook are its secret.
func Redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "(unparsable URL)"
	}
	return u.Scheme + "://" + u.Host
}

// New returns a Sender and starts its delivery goroutine; Close stops it.
func New(opts Options) (*Sender, error) {
	u, err := url.Parse(opts.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("webhook URL %s... is not an http(s) URL", Redact(opts.URL))
	}
	if opts.Queue <= 0 {
		opts.Queue = 1000
	}
	if opts.Attempts <= 0 {
		opts.Attempts = 5
	}
	if opts.Backoff <= 0 {
		opts.Backoff = time.Second
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 10 * time.Second
	}
	s := &Sender{opts: opts, hc: opts.HTTPClient, log: opts.Logger, queue: make(chan runevents.Notification, opts.Queue)}
	if s.hc == nil {
		s.hc = &http.Client{}
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.log = s.log.With("webhook", Redact(opts.URL))
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.wg.Go(s.loop)
	return s, nil
}

// Notify implements runevents.Notifier: it queues n, or drops it when the
// queue is full.
func (s *Sender) Notify(n runevents.Notification) {
	select {
	case s.queue <- n:
	default:
		s.log.Warn("webhook queue full: notification dropped", "run_id", n.Run.RunID, "kind", n.Event.Kind.String())
	}
}

// Close stops delivering; what is still queued is dropped.
func (s *Sender) Close() {
	s.cancel()
	s.wg.Wait()
}

func (s *Sender) loop() {
	for {
		select {
		case <-s.ctx.Done():
			return
		case n := <-s.queue:
			s.deliver(n)
		}
	}
}

// mrkdwn escapes the three characters Slack's (and Mattermost's) message
// text gives a meaning: in a run name, "<!channel>" would notify a whole
// channel and "<http://x|y>" would show a link labelled as anything.
var mrkdwn = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

// BodyOf returns the JSON body of a notification. Its text has '&', '<'
// and '>' escaped as Slack's mrkdwn requires (&amp; &lt; &gt;); the run
// fields keep the names as they are.
func (s *Sender) BodyOf(n runevents.Notification) Body {
	name := n.Run.RunName
	if name == "" {
		name = n.Run.RunID
	}
	state, text := "open", fmt.Sprintf("Run %s (%s): %s", name, n.Run.RunID, n.Event.Message)
	if n.Closed {
		state = "closed"
		text = fmt.Sprintf("Run %s (%s) moves again: %s", name, n.Run.RunID, n.Event.Message)
	}
	b := Body{Text: mrkdwn.Replace(text), State: state, Event: wire.EventToJSON(&n.Event),
		Run: BodyRun{RunID: n.Run.RunID, RunName: n.Run.RunName, ExperimentID: n.Run.ExperimentID}}
	if s.opts.RunURL != "" && strings.Count(s.opts.RunURL, "%s") == 2 {
		b.Run.URL = fmt.Sprintf(s.opts.RunURL, n.Run.ExperimentID, n.Run.RunID)
	}
	return b
}

func (s *Sender) deliver(n runevents.Notification) {
	body, err := json.Marshal(s.BodyOf(n))
	if err != nil {
		s.log.Error("encode webhook body", "err", err)
		return
	}
	wait := s.opts.Backoff
	for attempt := 1; ; attempt++ {
		err := s.post(body)
		if err == nil {
			return
		}
		if attempt >= s.opts.Attempts {
			s.log.Warn("webhook failed: notification dropped", "attempts", attempt, "run_id", n.Run.RunID, "err", err)
			return
		}
		t := time.NewTimer(wait)
		select {
		case <-s.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		wait = min(2*wait, 30*time.Second)
	}
}

func (s *Sender) post(body []byte) error {
	ctx, cancel := context.WithTimeout(s.ctx, s.opts.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "POST", s.opts.URL, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "sextant-webhook")
	resp, err := s.hc.Do(req)
	if err != nil {
		// A *url.Error quotes the whole URL, whose path is the secret.
		if ue := (*url.Error)(nil); errors.As(err, &ue) {
			return fmt.Errorf("POST %s...: %w", Redact(s.opts.URL), ue.Err)
		}
		return err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode >= 300 {
		return fmt.Errorf("the webhook answered %s", resp.Status)
	}
	return nil
}
