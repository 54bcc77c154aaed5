"""kafkactl.client"""
