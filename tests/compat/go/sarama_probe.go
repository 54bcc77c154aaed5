// sarama_probe drives Sarama (Debian's golang-github-shopify-sarama-dev) against a broker:
//
//	sarama_probe BROKER KAFKA_VERSION TOPIC COUNT
//
// At the protocol versions of KAFKA_VERSION (e.g. 0.8.2.0, 0.10.2.0, 2.1.0) it sends COUNT
// messages in one batch with a SyncProducer (acks=all), reads them back with a partition
// consumer from the oldest offset, lists ACLs through the ClusterAdmin (from 0.11; no
// ApiVersions handshake first) and then lists topics on the same admin client. It prints
// one JSON line of what Sarama saw.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/Shopify/sarama"
)

type result struct {
	Produced []int64 `json:"produced"`
	ProduceError string `json:"produce_error"`
	Consumed []string `json:"consumed"`
	ConsumeError string `json:"consume_error"`
	AclError *string `json:"acl_error"`
	TopicsAfterAcl int `json:"topics_after_acl"`
	AdminError string `json:"admin_error"`
}

func main() {
	broker, versionText, topic := os.Args[1], os.Args[2], os.Args[3]
	count, _ := strconv.Atoi(os.Args[4])
	version, err := sarama.ParseKafkaVersion(versionText)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	cfg := sarama.NewConfig()
	cfg.Version = version
	cfg.ClientID = "sarama-probe"
	cfg.Producer.Return.Successes = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Flush.Messages = count // one request holding every message
	cfg.Producer.Flush.Frequency = 50 * time.Millisecond
	cfg.Producer.Retry.Max = 0
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	out := result{Produced: []int64{}, Consumed: []string{}}

	producer, err := sarama.NewSyncProducer([]string{broker}, cfg)
	if err == nil {
		msgs := make([]*sarama.ProducerMessage, count)
		for i := range msgs {
			msgs[i] = &sarama.ProducerMessage{Topic: topic, Partition: 0,
				Value: sarama.StringEncoder(fmt.Sprintf("v%d", i))}
		}
		cfg.Producer.Partitioner = sarama.NewManualPartitioner
		if err = producer.SendMessages(msgs); err == nil {
			for _, m := range msgs {
				out.Produced = append(out.Produced, m.Offset)
			}
		}
		producer.Close()
	}
	if errs, ok := err.(sarama.ProducerErrors); ok && len(errs) > 0 {
		out.ProduceError = errs[0].Err.Error() // the broker's reason, not "failed to deliver"
	} else if err != nil {
		out.ProduceError = err.Error()
	}

	if out.ProduceError == "" {
		consumer, err := sarama.NewConsumer([]string{broker}, cfg)
		if err == nil {
			pc, perr := consumer.ConsumePartition(topic, 0, sarama.OffsetOldest)
			err = perr
			if err == nil {
				deadline := time.After(30 * time.Second)
			loop:
				for len(out.Consumed) < count {
					select {
					case m := <-pc.Messages():
						out.Consumed = append(out.Consumed, string(m.Value))
					case e := <-pc.Errors():
						err = e
						break loop
					case <-deadline:
						break loop
					}
				}
				pc.Close()
			}
			consumer.Close()
		}
		if err != nil {
			out.ConsumeError = err.Error()
		}
	}

	if version.IsAtLeast(sarama.V0_11_0_0) {
		admin, err := sarama.NewClusterAdmin([]string{broker}, cfg)
		if err == nil {
			_, aclErr := admin.ListAcls(sarama.AclFilter{ResourceType: sarama.AclResourceAny,
				Operation: sarama.AclOperationAny, PermissionType: sarama.AclPermissionAny,
				ResourcePatternTypeFilter: sarama.AclPatternAny})
			text := "<nil>"
			if aclErr != nil {
				text = aclErr.Error()
			}
			out.AclError = &text
			topics, terr := admin.ListTopics()
			err = terr
			out.TopicsAfterAcl = len(topics)
			admin.Close()
		}
		if err != nil {
			out.AdminError = err.Error()
		}
	}
	line, _ := json.Marshal(out)
	fmt.Println(string(line))
}
