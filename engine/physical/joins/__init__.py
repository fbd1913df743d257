"""joins"""
