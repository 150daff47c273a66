// An old Go client with its default settings (Debian's sarama 1.22, whose default protocol
// version is 0.8.2): used by tests/compat/test_old_sarama.py.
//
//	sarama_old produce BOOTSTRAP TOPIC N     SyncProducer, defaults: Produce v0 (magic 0)
//	sarama_old consume BOOTSTRAP TOPIC N     partition consumer, defaults: Fetch v0
//	sarama_old group BOOTSTRAP TOPIC GROUP N consumer group (the one setting it requires,
//	                                         Version 0.10.2), marks and commits N messages
//	                                         (OffsetCommit v1, sarama's default), then exits
//
// Each consumed message is printed as "OFFSET VALUE" on its own line.
package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/Shopify/sarama"
)

func die(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
	os.Exit(1)
}

func main() {
	if len(os.Args) < 5 {
		die("usage: sarama_old produce|consume|group BOOTSTRAP TOPIC [GROUP] N")
	}
	mode, bootstrap, topic := os.Args[1], os.Args[2], os.Args[3]
	n, err := strconv.Atoi(os.Args[len(os.Args)-1])
	if err != nil {
		die("bad count: %v", err)
	}
	switch mode {
	case "produce":
		produce(bootstrap, topic, n)
	case "consume":
		consume(bootstrap, topic, n)
	case "group":
		group(bootstrap, topic, os.Args[4], n)
	default:
		die("unknown mode %s", mode)
	}
}

func produce(bootstrap, topic string, n int) {
	cfg := sarama.NewConfig()
	cfg.Producer.Return.Successes = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	p, err := sarama.NewSyncProducer([]string{bootstrap}, cfg)
	if err != nil {
		die("producer: %v", err)
	}
	defer p.Close()
	for i := 0; i < n; i++ {
		_, off, err := p.SendMessage(&sarama.ProducerMessage{
			Topic: topic, Partition: 0, Value: sarama.StringEncoder(fmt.Sprintf("m-%d", i))})
		if err != nil {
			die("send: %v", err)
		}
		fmt.Printf("%d m-%d\n", off, i)
	}
}

func consume(bootstrap, topic string, n int) {
	c, err := sarama.NewConsumer([]string{bootstrap}, sarama.NewConfig())
	if err != nil {
		die("consumer: %v", err)
	}
	defer c.Close()
	pc, err := c.ConsumePartition(topic, 0, sarama.OffsetOldest)
	if err != nil {
		die("consume partition: %v", err)
	}
	defer pc.Close()
	deadline := time.After(30 * time.Second)
	for i := 0; i < n; i++ {
		select {
		case m := <-pc.Messages():
			fmt.Printf("%d %s\n", m.Offset, m.Value)
		case e := <-pc.Errors():
			die("consume: %v", e)
		case <-deadline:
			die("timed out after %d messages", i)
		}
	}
}

type handler struct {
	left int
	mu   sync.Mutex
	done chan struct{}
}

func (h *handler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (h *handler) Cleanup(sarama.ConsumerGroupSession) error { return nil }
func (h *handler) ConsumeClaim(s sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for m := range claim.Messages() {
		h.mu.Lock()
		if h.left == 0 {
			h.mu.Unlock()
			return nil
		}
		fmt.Printf("%d %s\n", m.Offset, m.Value)
		s.MarkMessage(m, "")
		h.left--
		if h.left == 0 {
			close(h.done)
		}
		h.mu.Unlock()
	}
	return nil
}

func group(bootstrap, topic, groupID string, n int) {
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V0_10_2_0 // consumer groups require it; everything else default
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	g, err := sarama.NewConsumerGroup([]string{bootstrap}, groupID, cfg)
	if err != nil {
		die("group: %v", err)
	}
	h := &handler{left: n, done: make(chan struct{})}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	go func() {
		for ctx.Err() == nil {
			if err := g.Consume(ctx, []string{topic}, h); err != nil {
				fmt.Fprintf(os.Stderr, "consume: %v\n", err)
				time.Sleep(200 * time.Millisecond)
			}
		}
	}()
	select {
	case <-h.done:
	case <-ctx.Done():
		die("timed out with %d messages left", h.left)
	}
	cancel()
	if err := g.Close(); err != nil { // flushes the marked offsets: OffsetCommit v1
		die("close: %v", err)
	}
}
