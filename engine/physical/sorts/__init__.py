"""sorts"""
