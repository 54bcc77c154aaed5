"""kafkactl.protocol"""
