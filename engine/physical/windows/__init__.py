"""windows"""
