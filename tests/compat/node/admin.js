// kafkajs admin: create, list, describe and delete topics against BROKER (argv[2]).
// Prints one JSON line with what kafkajs saw.
const { Kafka, logLevel } = require('kafkajs');

const kafka = new Kafka({ brokers: [process.argv[2]], clientId: 'compat-admin',
  logLevel: logLevel.NOTHING, retry: { retries: 3 } });

(async () => {
  const admin = kafka.admin();
  const out = {};
  try {
    await admin.connect();
    out.created = await admin.createTopics({ waitForLeaders: true, topics: [
      { topic: 'js-a', numPartitions: 3, configEntries: [{ name: 'retention.ms', value: '60000' }] },
      { topic: 'js-b', numPartitions: 1 }] });
    out.createdAgain = await admin.createTopics({ topics: [{ topic: 'js-a' }] });
    try {
      await admin.createTopics({ topics: [{ topic: 'js-bad', configEntries: [
        { name: 'no.such.config', value: '1' }] }] });
      out.badConfig = 'accepted';
    } catch (e) {
      out.badConfig = e.errors ? e.errors.map((x) => x.type) : [e.type || e.message];
    }
    out.listed = (await admin.listTopics()).sort();
    const meta = await admin.fetchTopicMetadata({ topics: ['js-a'] });
    out.partitions = meta.topics[0].partitions.length;
    const cfg = await admin.describeConfigs({ includeSynonyms: false,
      resources: [{ type: 2, name: 'js-a', configNames: ['retention.ms'] }] });
    out.retention = cfg.resources[0].configEntries[0].configValue;
    await admin.deleteTopics({ topics: ['js-b'] });
    out.afterDelete = (await admin.listTopics()).sort();
    out.cluster = (await admin.describeCluster()).brokers.length;
    out.ok = true;
  } catch (e) {
    out.ok = false; out.error = `${e.name}: ${e.message}`;
  }
  console.log(JSON.stringify(out));
  await admin.disconnect();
  process.exit(0);
})();
