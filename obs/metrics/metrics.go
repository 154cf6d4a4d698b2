// Package metrics exposes conch's Prometheus metrics (conch's own named
// conch_*), fed from the gateway's event hub: it subscribes to every
// conversation's events and counts messages, turns, model calls, tool calls
// and the queue. Sandboxes and terminals are counted when scraped. The
// standard go_* (goroutines, heap, GC) and process_* (resident memory, open
// files, CPU) collectors come with them: what a leak shows first.
package metrics

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"conch"
)

// Options configures a Collector.
type Options struct {
	// Events is the gateway's event hub. Required for Run.
	Events conch.EventSource
	// Sandboxes, if set, is asked for the sandboxes at each scrape.
	Sandboxes conch.SandboxAdmin
	// Terminals, if set, returns the number of open terminals.
	Terminals func() int
	// Tools are the tool names counted under their own label value (the
	// tools conch offers the model, configured ones included). Any other
	// name a tool call carries, chosen by the model, counts as "other", so
	// the label set stays bounded. SetTools replaces the list later.
	Tools []string
	// Models are the configured models ("provider/name"): the only values
	// of the model label; any other model counts as "other".
	Models []string
	Logger *slog.Logger
}

// Collector keeps the metrics.
type Collector struct {
	opts Options
	reg  *prometheus.Registry
	log  *slog.Logger

	events      *prometheus.CounterVec
	messages    *prometheus.CounterVec
	notices     *prometheus.CounterVec
	turns       *prometheus.CounterVec
	turnDur     *prometheus.HistogramVec
	modelDur    prometheus.Histogram
	modelErrs   *prometheus.CounterVec
	tokens      *prometheus.CounterVec
	usageToks   *prometheus.CounterVec
	usageCost   *prometheus.CounterVec
	usageCalls  *prometheus.CounterVec
	toolCalls   *prometheus.CounterVec
	toolDur     *prometheus.HistogramVec
	queue       prometheus.Gauge
	running     prometheus.Gauge
	resubscribe prometheus.Counter

	mu    sync.Mutex
	live  map[turnKey]*turnState
	tools map[string]bool // label values allowed for "tool"
}

type turnKey struct {
	key  conch.ConversationKey
	turn conch.TurnID
}

type turnState struct {
	status conch.TurnStatus
	start  time.Time // running since
	mark   time.Time // when the current model call began
}

// New returns a Collector with its metrics registered.
func New(opts Options) *Collector {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	c := &Collector{opts: opts, reg: prometheus.NewRegistry(), log: opts.Logger, live: map[turnKey]*turnState{}}
	c.SetTools(opts.Tools)
	durations := []float64{.05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800}
	c.events = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "conch_events_total", Help: "Conversation events seen, by type."}, []string{"type"})
	c.messages = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "conch_messages_total", Help: "Messages by channel and direction (in: from people; out: answers)."}, []string{"channel", "direction"})
	c.notices = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "conch_notices_total", Help: "Notices sent (command answers, queue positions), by channel."}, []string{"channel"})
	c.turns = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "conch_turns_total", Help: "Turns ended, by channel and status (done, stopped, abandoned)."}, []string{"channel", "status"})
	c.turnDur = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "conch_turn_duration_seconds", Help: "Time from a turn's start to its end.", Buckets: durations}, []string{"channel", "status"})
	c.modelDur = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "conch_model_call_duration_seconds", Help: "Latency of model calls that answered (from the call's start to its usage report).", Buckets: durations})
	c.modelErrs = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "conch_model_errors_total", Help: "Failed model calls that were retried, by error class."}, []string{"class"})
	c.tokens = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "conch_model_tokens_total", Help: "Model tokens, by direction (input, output)."}, []string{"direction"})
	c.toolCalls = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "conch_tool_calls_total", Help: "Tool calls, by tool (one conch offers, else other) and result (ok, error)."}, []string{"tool", "result"})
	c.toolDur = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "conch_tool_duration_seconds", Help: "Tool call durations, by tool (one conch offers, else other).", Buckets: durations}, []string{"tool"})
	c.queue = prometheus.NewGauge(prometheus.GaugeOpts{Name: "conch_queue_depth", Help: "Turns waiting for their conversation's worker."})
	c.running = prometheus.NewGauge(prometheus.GaugeOpts{Name: "conch_turns_running", Help: "Turns running now."})
	c.resubscribe = prometheus.NewCounter(prometheus.CounterOpts{Name: "conch_metrics_resubscribes_total", Help: "Times the metrics subscriber fell behind the event hub and subscribed again (events in between are not counted)."})
	c.usageToks = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "conch_model_usage_tokens_total", Help: "Model tokens as the providers report them (estimated where they report none), by configured model and kind (input, cached: the part of input read from the prompt cache, output)."}, []string{"model", "kind"})
	c.usageCost = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "conch_model_cost_usd_total", Help: "What model calls cost in USD by the price table, by configured model."}, []string{"model"})
	c.usageCalls = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "conch_model_calls_total", Help: "Answered model calls, by configured model and whether it was a fallback."}, []string{"model", "fallback"})
	c.reg.MustRegister(c.events, c.messages, c.notices, c.turns, c.turnDur, c.modelDur, c.modelErrs, c.tokens,
		c.usageToks, c.usageCost, c.usageCalls, c.toolCalls, c.toolDur, c.queue, c.running, c.resubscribe, &scrapeCollector{c: c})
	c.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return c
}

// SetTools sets the tool names counted under their own label value (see
// Options.Tools); other names count as "other".
func (c *Collector) SetTools(names []string) {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	c.mu.Lock()
	c.tools = m
	c.mu.Unlock()
}

// toolLabel is the label value for a tool name: the name of a known tool,
// else "other".
func (c *Collector) toolLabel(name string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.tools[name] {
		return name
	}
	return "other"
}

// Registry returns the registry, for tests and extra collectors.
func (c *Collector) Registry() *prometheus.Registry { return c.reg }

// Handler serves the metrics in Prometheus text format.
func (c *Collector) Handler() http.Handler {
	return promhttp.HandlerFor(c.reg, promhttp.HandlerOpts{ErrorLog: slogPrinter{c.log}})
}

// Run follows every conversation's live events until ctx is done.
func (c *Collector) Run(ctx context.Context) error {
	for ctx.Err() == nil {
		ch, err := c.opts.Events.Subscribe(ctx, conch.ConversationKey{}, -1)
		if err != nil {
			c.log.Warn("metrics: subscribe", "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
			continue
		}
		for ev := range ch {
			c.Observe(ev)
		}
		if ctx.Err() == nil {
			c.resubscribe.Inc()
		}
	}
	return nil
}

// Observe counts one event.
func (c *Collector) Observe(ev conch.Event) {
	if ev.Data == nil {
		return
	}
	c.events.WithLabelValues(ev.Data.Type()).Inc()
	ch := string(ev.Key.Channel)
	switch d := ev.Data.(type) {
	case conch.MessageEvent:
		switch d.Role {
		case conch.RoleUser:
			c.messages.WithLabelValues(ch, "in").Inc()
		case conch.RoleAssistant:
			c.messages.WithLabelValues(ch, "out").Inc()
		}
	case conch.NoticeEvent:
		c.notices.WithLabelValues(ch).Inc()
	case conch.TurnState:
		c.turnState(ev, d)
	case conch.ContextUse:
		c.tokens.WithLabelValues("input").Add(float64(d.InputTokens))
		c.tokens.WithLabelValues("output").Add(float64(d.OutputTokens))
		c.mu.Lock()
		if t := c.live[turnKey{ev.Key, ev.Turn}]; t != nil && t.status == conch.TurnRunning {
			c.modelDur.Observe(ev.At.Sub(t.mark).Seconds())
			t.mark = ev.At
		}
		c.mu.Unlock()
	case conch.ModelUsage:
		model := "other"
		if slices.Contains(c.opts.Models, d.Model) {
			model = d.Model
		}
		c.usageToks.WithLabelValues(model, "input").Add(float64(d.InputTokens))
		c.usageToks.WithLabelValues(model, "cached").Add(float64(d.CachedTokens))
		c.usageToks.WithLabelValues(model, "output").Add(float64(d.OutputTokens))
		c.usageCost.WithLabelValues(model).Add(d.CostUSD)
		c.usageCalls.WithLabelValues(model, strconv.FormatBool(d.Fallback)).Inc()
	case conch.RetryEvent:
		c.modelErrs.WithLabelValues(errorClass(d.Reason)).Inc()
		c.setMark(ev, ev.At.Add(d.Delay))
	case conch.ToolFinished:
		result := "ok"
		if d.IsError {
			result = "error"
		}
		tool := c.toolLabel(d.Name)
		c.toolCalls.WithLabelValues(tool, result).Inc()
		c.toolDur.WithLabelValues(tool).Observe(d.Duration.Seconds())
		// The next model call starts when the tools are done.
		c.setMark(ev, ev.At)
	}
}

func (c *Collector) setMark(ev conch.Event, at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t := c.live[turnKey{ev.Key, ev.Turn}]; t != nil {
		t.mark = at
	}
}

func (c *Collector) turnState(ev conch.Event, d conch.TurnState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := turnKey{ev.Key, ev.Turn}
	t := c.live[k]
	switch d.Status {
	case conch.TurnPending:
		if t == nil {
			c.live[k] = &turnState{status: conch.TurnPending}
			c.queue.Inc()
		}
	case conch.TurnRunning:
		if t == nil {
			t = &turnState{}
			c.live[k] = t
		} else if t.status == conch.TurnPending {
			c.queue.Dec()
		}
		if t.status != conch.TurnRunning {
			c.running.Inc()
		}
		t.status, t.start, t.mark = conch.TurnRunning, ev.At, ev.At
	default: // done, stopped, abandoned
		if t != nil {
			switch t.status {
			case conch.TurnPending:
				c.queue.Dec()
			case conch.TurnRunning:
				c.running.Dec()
				c.turnDur.WithLabelValues(string(ev.Key.Channel), string(d.Status)).Observe(ev.At.Sub(t.start).Seconds())
			}
			delete(c.live, k)
		}
		if d.Resumes {
			return // not over: it resumes at the next start and ends then
		}
		c.turns.WithLabelValues(string(ev.Key.Channel), string(d.Status)).Inc()
	}
}

// errorClass maps a retry's reason to a bounded label: one of conch's
// error kinds, or "other".
func errorClass(reason string) string {
	r := strings.ToLower(reason)
	for _, k := range []conch.ErrorKind{conch.KindContextTooLong, conch.KindBadRequest, conch.KindTransient, conch.KindAuth,
		conch.KindInvalid, conch.KindNotFound, conch.KindUnavailable, conch.KindInternal} {
		if strings.HasPrefix(r, string(k)) || strings.Contains(r, "model "+string(k)) {
			return string(k)
		}
	}
	switch {
	case strings.Contains(r, "429") || strings.Contains(r, "rate"):
		return "rate_limited"
	case strings.Contains(r, "timeout") || strings.Contains(r, "deadline"):
		return "timeout"
	}
	return "other"
}

// scrapeCollector reads sandboxes and terminals at scrape time.
type scrapeCollector struct{ c *Collector }

var (
	sandboxesDesc = prometheus.NewDesc("conch_sandboxes", "Sandboxes of this instance, by state (running, exited, …) and kind (conversation, pool, orphan).", []string{"state", "kind"}, nil)
	terminalsDesc = prometheus.NewDesc("conch_terminals", "Open terminals in all sandboxes.", nil, nil)
	scrapeErrDesc = prometheus.NewDesc("conch_sandbox_list_errors", "1 when the sandbox backend could not be listed at this scrape.", nil, nil)
)

func (s *scrapeCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- sandboxesDesc
	ch <- terminalsDesc
	ch <- scrapeErrDesc
}

func (s *scrapeCollector) Collect(ch chan<- prometheus.Metric) {
	o := s.c.opts
	if o.Sandboxes != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		counts, err := sandboxCounts(ctx, o.Sandboxes)
		cancel()
		failed := 0.0
		if err != nil {
			failed = 1
			s.c.log.Warn("metrics: list sandboxes", "err", err)
		}
		ch <- prometheus.MustNewConstMetric(scrapeErrDesc, prometheus.GaugeValue, failed)
		for _, c := range counts {
			ch <- prometheus.MustNewConstMetric(sandboxesDesc, prometheus.GaugeValue, float64(c.N), c.State, c.Kind)
		}
	}
	if o.Terminals != nil {
		ch <- prometheus.MustNewConstMetric(terminalsDesc, prometheus.GaugeValue, float64(o.Terminals()))
	}
}

// sandboxCounts counts the sandboxes by state and kind: from one listing
// where the backend can (a scrape every few seconds must not look at every
// sandbox), else from its list of them.
func sandboxCounts(ctx context.Context, a conch.SandboxAdmin) ([]conch.SandboxCount, error) {
	if c, ok := a.(conch.SandboxCounter); ok {
		return c.SandboxCounts(ctx)
	}
	infos, err := a.Sandboxes(ctx)
	if err != nil {
		return nil, err
	}
	type sk struct{ state, kind string }
	counts := map[sk]int{}
	for _, in := range infos {
		kind := "conversation"
		switch {
		case in.Pool:
			kind = "pool"
		case in.Orphan:
			kind = "orphan"
		}
		counts[sk{in.State, kind}]++
	}
	out := make([]conch.SandboxCount, 0, len(counts))
	for k, n := range counts {
		out = append(out, conch.SandboxCount{State: k.state, Kind: k.kind, N: n})
	}
	return out, nil
}

type slogPrinter struct{ log *slog.Logger }

func (p slogPrinter) Println(v ...any) { p.log.Warn("metrics: " + fmt.Sprint(v...)) }
