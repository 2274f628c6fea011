package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/zerolayer/zerolayer/billing/finance"
	"github.com/zerolayer/zerolayer/billing/ledger"
	"github.com/zerolayer/zerolayer/contracts"
)

// runTags is `zerolayer tags`: list, set, delete and test the value-tag
// rules rating applies to jobs.
func runTags(ctx context.Context, args []string) error {
	sub, args, err := parseSub(newFlags("tags"), args)
	if err != nil {
		return err
	}
	switch sub {
	case "list":
		return tagsList(ctx, args)
	case "set":
		return tagsSet(ctx, args)
	case "delete":
		return tagsDelete(ctx, args)
	default: // "test": parseSub knows only these.
		return tagsTest(ctx, args)
	}
}

// tagRuleJSON is a rule in force as the tags commands write it in JSON.
type tagRuleJSON struct {
	ledger.TagRule
	// Rule is the rule's condition, as tags set reads it.
	Rule string `json:"rule"`
	// Source is tenant (the tenant's own rule) or default.
	Source string `json:"source"`
}

func ruleJSON(r ledger.TagRule) tagRuleJSON {
	return tagRuleJSON{TagRule: r, Rule: r.Condition(), Source: ruleSource(r)}
}

func ruleSource(r ledger.TagRule) string {
	if r.Tenant != "" {
		return "tenant"
	}
	return "default"
}

// rulesInForce reads the rules in force for tenant (the default rules
// when empty), sorted by tag.
func rulesInForce(ctx context.Context, db ledger.DB, tenant string) ([]ledger.TagRule, error) {
	rules, err := ledger.LoadTagRules(ctx, db, tenant)
	if err != nil {
		return nil, err
	}
	slices.SortStableFunc(rules, func(a, b ledger.TagRule) int { return cmp.Compare(a.Tag, b.Tag) })
	return rules, nil
}

// tagsList is `zerolayer tags list`.
func tagsList(ctx context.Context, args []string) error {
	fs := newFlags("tags list")
	tenant := fs.String("tenant", "", "`TENANT` whose rules in force to list: its own, and the default rules of the tags it has none for (default: the default rules)")
	formatS := fs.String("format", "table", "output format: table or json")
	dbURL := addDatabaseFlag(fs, "")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	format, err := parseBookFormat(*formatS)
	if err != nil {
		return err
	}
	pool, err := openDB(ctx, *dbURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	rules, err := rulesInForce(ctx, pool, *tenant)
	if err != nil {
		return err
	}
	if format == finance.FormatJSON {
		out := make([]tagRuleJSON, len(rules))
		for i, r := range rules {
			out[i] = ruleJSON(r)
		}
		return writeJSON(out)
	}
	tw := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TAG\tRULE\tSOURCE")
	for _, r := range rules {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", r.Tag, r.Condition(), ruleSource(r))
	}
	return tw.Flush()
}

// tagsSet is `zerolayer tags set`.
func tagsSet(ctx context.Context, args []string) error {
	fs := newFlags("tags set")
	tenant := fs.String("tenant", "", "`TENANT` whose rules of the tag to replace (default: the default rules of the tag)")
	dbURL := addDatabaseFlag(fs, "")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) < 2 {
		return usagef("give a tag and at least one rule, such as: high_latency_risk 'time_to_first_token_ms>50'")
	}
	tag := pos[0]
	rules := make([]ledger.TagRule, 0, len(pos)-1)
	for _, cond := range pos[1:] {
		r, err := ledger.ParseTagRule(*tenant, tag, cond)
		if err != nil {
			return usagef("%v", err)
		}
		rules = append(rules, r)
	}
	pool, err := openDB(ctx, *dbURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := ledger.SetTagRules(ctx, pool, *tenant, tag, rules); err != nil {
		return err
	}
	conds := make([]string, len(rules))
	for i, r := range rules {
		conds[i] = r.Condition()
	}
	fmt.Fprintf(stderr, "zerolayer tags set: %s: %s when %s. Charges already rated keep their tags until re-rated with 'zerolayer rerate'.\n",
		whose(*tenant), tag, strings.Join(conds, " and "))
	return nil
}

// whose names the owner of rules: a tenant, or the defaults.
func whose(tenant string) string {
	if tenant == "" {
		return "default rules"
	}
	return "tenant " + tenant
}

// tagsDelete is `zerolayer tags delete`.
func tagsDelete(ctx context.Context, args []string) error {
	fs := newFlags("tags delete")
	tenant := fs.String("tenant", "", "`TENANT` whose rules of the tag to delete; it falls back to the default rules of the tag (default: delete the default rules of the tag)")
	dbURL := addDatabaseFlag(fs, "")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("give one tag")
	}
	tag := pos[0]
	pool, err := openDB(ctx, *dbURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	before, err := ledger.LoadTagRules(ctx, pool, *tenant)
	if err != nil {
		return err
	}
	if !slices.ContainsFunc(before, func(r ledger.TagRule) bool { return r.Tag == tag && r.Tenant == *tenant }) {
		return fmt.Errorf("%s: no rules of tag %q to delete; 'zerolayer tags list' lists them", whose(*tenant), tag)
	}
	if err := ledger.SetTagRules(ctx, pool, *tenant, tag, nil); err != nil {
		return err
	}
	after, err := ledger.LoadTagRules(ctx, pool, *tenant)
	if err != nil {
		return err
	}
	var conds []string
	for _, r := range after {
		if r.Tag == tag {
			conds = append(conds, r.Condition())
		}
	}
	now := "no job gets it"
	if *tenant != "" && len(conds) > 0 {
		now = "the default rules apply: " + strings.Join(conds, " and ")
	}
	fmt.Fprintf(stderr, "zerolayer tags delete: %s: rules of %s deleted; %s. Charges already rated keep their tags until re-rated with 'zerolayer rerate'.\n",
		whose(*tenant), tag, now)
	return nil
}

// tagsTest is `zerolayer tags test`: which rules hold for a job, and so
// which tags rating gives it.
func tagsTest(ctx context.Context, args []string) error {
	fs := newFlags("tags test")
	tenant := fs.String("tenant", "", "`TENANT` of --job, whose rules apply (with --usage: the record's tenant by default)")
	job := fs.String("job", "", "the stored job `ID` whose usage to test")
	usageFile := fs.String("usage", "", "instead of --job: a usage record JSON `FILE` ('-' for stdin)")
	formatS := fs.String("format", "table", "output format: table or json")
	dbURL := addDatabaseFlag(fs, "")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	format, err := parseBookFormat(*formatS)
	if err != nil {
		return err
	}
	if (*job == "") == (*usageFile == "") {
		return usagef("give one of --job ID (with --tenant) or --usage FILE")
	}
	if *job != "" && *tenant == "" {
		return usagef("--job needs --tenant: job ids are unique per tenant")
	}
	var u contracts.Usage
	if *usageFile != "" {
		var data []byte
		if *usageFile == "-" {
			data, err = io.ReadAll(os.Stdin)
		} else {
			data, err = os.ReadFile(*usageFile)
		}
		if err != nil {
			return fmt.Errorf("read --usage: %w", err)
		}
		if u, err = contracts.DecodeUsage(data); err != nil {
			return fmt.Errorf("--usage %s: %w", *usageFile, err)
		}
		if *tenant == "" {
			*tenant = u.Tenant
		}
	}
	pool, err := openDB(ctx, *dbURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	if *job != "" {
		if u, err = ledger.GetUsage(ctx, pool, *tenant, *job); err != nil {
			return err
		}
	}
	rules, err := rulesInForce(ctx, pool, *tenant)
	if err != nil {
		return err
	}
	tags := ledger.Tags(u, rules)
	type result struct {
		tagRuleJSON
		Value string `json:"value"`
		Holds bool   `json:"holds"`
	}
	results := make([]result, len(rules))
	for i, r := range rules {
		v, _ := r.Metric.Value(u)
		results[i] = result{ruleJSON(r), v.String(), r.Holds(u)}
	}
	if format == finance.FormatJSON {
		err = writeJSON(struct {
			Tenant string   `json:"tenant"`
			JobID  string   `json:"job_id"`
			Rules  []result `json:"rules"`
			Tags   []string `json:"tags"`
		}{*tenant, u.JobID, results, tags})
	} else {
		tw := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "TAG\tRULE\tSOURCE\tVALUE\tHOLDS")
		for _, r := range results {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.Tag, r.Rule, r.Source, r.Value, yesNo(r.Holds))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		_, err = fmt.Fprintf(stdout, "\ntags: %s\n", cmp.Or(strings.Join(tags, ", "), "none"))
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "zerolayer tags test: the tags of job %s with the rules in force now for %s; its charge keeps the tags it was rated with until re-rated with 'zerolayer rerate'.\n",
		u.JobID, *tenant)
	return nil
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
