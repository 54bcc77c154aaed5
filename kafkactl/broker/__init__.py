"""kafkactl.broker"""
