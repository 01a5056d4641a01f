package client_test

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/pgq-dev/pgq/client"
)

// consumeOrders is the client snippet the docs show (see
// TestDocsShowTheExample): an exclusive group's transactions, each row
// decoded by column name into a struct.
func consumeOrders(ctx context.Context) error {
	c, err := client.New("127.0.0.1:5480", client.Options{Token: os.Getenv("PGQ_AUTH_TOKEN")})
	if err != nil {
		return err
	}
	cs, err := c.Consumer("orders", client.ConsumerOptions{Member: "worker-1"})
	if err != nil {
		return err
	}
	defer cs.Close(context.WithoutCancel(ctx)) // hand the lease over at once
	return cs.Consume(ctx, func(ctx context.Context, tx *client.Transaction) error {
		for i := range tx.Changes {
			var o struct {
				ID    int64
				Total string // numeric, as PostgreSQL writes it: exact
			}
			if err := client.Scan(&tx.Changes[i], client.NewImage, &o); err != nil { // by column name, through pgx's types
				return err
			}
			fmt.Println(tx.CommitLSN, tx.Ordinal(i), o.ID, o.Total)
		}
		return nil // committed once the batch is handled
	})
}

// Example_consume reads group orders of a pgq on 127.0.0.1:5480 (the
// snippet of docs/consumer-groups.md).
func Example_consume() {
	if err := consumeOrders(context.Background()); err != nil {
		fmt.Println(err)
	}
}

// docsWithTheSnippet is the page that shows consumeOrders.
const docsWithTheSnippet = "../docs/consumer-groups.md"

// TestDocsShowTheExample: the docs' Go snippet is consumeOrders as it is
// compiled here, import path included, so it cannot drift from the API.
func TestDocsShowTheExample(t *testing.T) {
	src, err := os.ReadFile("readme_example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	fn := regexp.MustCompile(`(?s)\nfunc consumeOrders\(ctx context.Context\) error \{\n.*?\n\}\n`).Find(src)
	if fn == nil {
		t.Fatal("consumeOrders not found")
	}
	doc, err := os.ReadFile(docsWithTheSnippet)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`import "github.com/pgq-dev/pgq/client"`, string(fn[1:])} {
		if !strings.Contains(string(doc), want) {
			t.Errorf("%s does not show, as written in consumeOrders:\n%s", docsWithTheSnippet, want)
		}
	}
}
