"""kafkactl.log"""
