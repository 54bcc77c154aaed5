"""kafkactl.record"""
