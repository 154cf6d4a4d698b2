package main

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"conch"
)

// usageCmd reports what model calls used and cost, from the store alone:
// it works without a model configured and while conch up runs.
func (a *app) usageCmd() *cobra.Command {
	var (
		by     string
		days   int
		prices bool
	)
	cmd := &cobra.Command{
		Use:   "usage",
		Short: "What model calls used and cost, by conversation, person, day or model",
		Long: `Add up every model call's tokens (input, the cached part of it, output) and price, as
recorded when it was made, grouped by conversation, person (channel:sender), UTC day or model.
Calls whose tokens conch estimated (the provider reported none) are counted in "est.".
--prices prints the price table in use (built in, with the config's [prices] overrides).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			db, cfg, err := a.openStore(cmd.Context())
			if err != nil {
				return err
			}
			defer db.Close()
			if prices {
				w := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(w, "MODEL (PREFIX)\tINPUT $/M\tCACHED $/M\tOUTPUT $/M\tDATE\tSOURCE")
				for _, p := range newMeter(cfg, db, nil, nil).Prices().Rows() {
					fmt.Fprintf(w, "%s\t%g\t%g\t%g\t%s\t%s\n", p.Model, p.Input, p.Cached, p.Output, p.Date, p.Source)
				}
				return w.Flush()
			}
			var since time.Time
			if days > 0 {
				since = conch.DayStart(time.Now()).AddDate(0, 0, -(days - 1))
			}
			rows, err := db.UsageReport(cmd.Context(), conch.UsageGroup(by), since)
			if err != nil {
				return err
			}
			if len(rows) == 0 {
				fmt.Fprintln(a.stdout, "No model calls recorded.")
				return nil
			}
			w := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
			fmt.Fprintf(w, "%s\tCALLS\tINPUT\tCACHED\tOUTPUT\tEST.\tUSD\t\n", by)
			var sum conch.UsageTotal
			for _, r := range rows {
				fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%d\t%d\t%.4f\t\n", r.Group, r.Calls, r.InputTokens, r.CachedTokens, r.OutputTokens, r.Estimated, r.CostUSD)
				sum.Calls += r.Calls
				sum.InputTokens += r.InputTokens
				sum.CachedTokens += r.CachedTokens
				sum.OutputTokens += r.OutputTokens
				sum.Estimated += r.Estimated
				sum.CostUSD += r.CostUSD
			}
			fmt.Fprintf(w, "total\t%d\t%d\t%d\t%d\t%d\t%.4f\t\n", sum.Calls, sum.InputTokens, sum.CachedTokens, sum.OutputTokens, sum.Estimated, sum.CostUSD)
			return w.Flush()
		},
	}
	cmd.Flags().StringVar(&by, "by", string(conch.ByConversation), "group by conversation, person, day or model")
	cmd.Flags().IntVar(&days, "days", 0, "only the last N UTC days, today included (0: all)")
	cmd.Flags().BoolVar(&prices, "prices", false, "print the price table in use instead")
	return cmd
}
