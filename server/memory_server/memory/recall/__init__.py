"""Finding the facts a question needs: hybrid ranking of vector and lexical candidates (rank),
the words too common in a scope to search by and the question's subjects (common_words), one
hop along links (expand), and the bookkeeping of what recall handed back (seen)."""
